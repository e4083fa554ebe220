"""Operating the daemon: its systemd unit, `doctor`, metrics and the event stream's readers."""

__all__: list[str] = []
