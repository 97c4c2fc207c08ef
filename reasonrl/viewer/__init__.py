"""The run viewer: a local, offline web page over run directories (`reasonrl view`).

`runs` reads what a run already writes (metrics.jsonl, rollouts.jsonl, eval results.json); `server`
serves the page in `static/` (uPlot vendored under `static/vendor/`) and a read-only JSON API.
"""
