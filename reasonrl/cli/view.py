"""`reasonrl view RUN_DIR [RUN_DIR ...] [--port P] [--host H]`: the local viewer web page over one or
several runs (curves overlaid, rollouts searchable, eval tables), served until Ctrl-C.

Owns: the command's arguments. Does not own: the server or what it reads (`reasonrl.viewer`).
"""

from __future__ import annotations

import sys


def _view(args) -> int:
    from reasonrl.viewer.server import Viewer

    viewer = Viewer(args.runs, host=args.host, port=args.port)
    names = ", ".join(r.name for r in viewer.app.runs)
    print(
        f"reasonrl viewer: {viewer.url} ({len(viewer.app.runs)} run(s): {names}); Ctrl-C stops it",
        file=sys.stderr,
    )
    if args.open:
        import webbrowser

        webbrowser.open(viewer.url)
    try:
        viewer.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        viewer.close()
    return 0


def add_view_parser(sub) -> None:
    v = sub.add_parser("view", help="a local web page over runs: curves, rollouts, eval tables")
    v.add_argument("runs", nargs="+", help="run directories, or directories of runs")
    v.add_argument("--port", type=int, default=8765, help="port (0 picks a free one)")
    v.add_argument("--host", default="127.0.0.1", help="address to bind (default: this machine only)")
    v.add_argument("--open", action="store_true", help="open the page in the default browser")
    v.set_defaults(fn=_view)
