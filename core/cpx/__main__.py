"""``python -m cpx``: the same as the ``cpx`` command."""

from __future__ import annotations

from cpx.cli import run

if __name__ == "__main__":
    run()
