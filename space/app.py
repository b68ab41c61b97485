"""The GAMUT leaderboard Space (``app_file`` of space/README.md).

Locally, `gamut space --results DIR` serves the same app over result folders. In a Space, set
these variables (Settings -> Variables):

- GAMUT_RESULTS_REPO: the results dataset (one folder per model: results.json, details.parquet,
  responses.parquet, model.json), written by `gamut worker --results-repo`;
- GAMUT_REQUESTS_REPO: the requests dataset (request files with a status), which this Space
  writes and `gamut worker --requests-repo` reads;
- GAMUT_DATASET: where questions, images and meta-rubrics come from (default: the sample);
- GAMUT_PRIMARY_JUDGE: the judge of the default board (default: the judge of the most runs);
- HF_TOKEN (a secret) with write access to the requests dataset.
"""

import os
from pathlib import Path

from gamut_hf.dataset.hub import HubFolder
from gamut_hf.leaderboard.space import SpaceConfig, build_app, launch_options

DATA = Path(os.environ.get("GAMUT_SPACE_DATA", "space-data"))
RESULTS_REPO = os.environ.get("GAMUT_RESULTS_REPO")
REQUESTS_REPO = os.environ.get("GAMUT_REQUESTS_REPO")

results_hub = HubFolder(RESULTS_REPO, DATA / "results") if RESULTS_REPO else None
requests_hub = HubFolder(REQUESTS_REPO, DATA / "requests") if REQUESTS_REPO else None
# The queue is read from the hub on every page load, queue refresh and submission (build_app).
demo = build_app(
    SpaceConfig(
        results=DATA / "results",
        requests=DATA / "requests",
        dataset=os.environ.get("GAMUT_DATASET", "gamut-sample"),
        primary_judge=os.environ.get("GAMUT_PRIMARY_JUDGE") or None,
        results_hub=results_hub,
        requests_hub=requests_hub,
    )
)

if __name__ == "__main__":
    demo.launch(**launch_options())
