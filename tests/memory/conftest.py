from tests.supervisor.conftest import daemons, root  # noqa: F401  (shared fixtures)
