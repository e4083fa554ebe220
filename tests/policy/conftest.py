"""A real directory tree with real symlinks, shared by the policy tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    for ws in ("alpha", "beta", "gamma"):
        (root / "ws" / ws).mkdir(parents=True)
        (root / "ws" / ws / "file").write_text(ws)
    (root / "outside").mkdir()
    (root / "outside" / "secret.txt").write_text("secret")
    (root / "outside" / "forbidden").mkdir()
    (root / "outside" / "forbidden" / "key").write_text("key")
    alpha = root / "ws" / "alpha"
    (alpha / "notes.txt").write_text("mine")
    (alpha / "sub").mkdir()
    links = {
        "link_out": "../../outside/secret.txt",
        "chain1": "chain2",
        "chain2": "sub/chain3",
        "sub/chain3": "../../../outside",
        "link_beta": "../beta/file",
        "link_gamma": "../gamma",
        "link_forbidden": str(root / "outside" / "forbidden" / "key"),
        "dangling_out": "/nonexistent-zc/x",
        "link_self": "notes.txt",
    }
    for name, target in links.items():
        os.symlink(target, alpha / name)
    return root
