"""The leaderboard Space: leaderboard, failure browser, analysis and judged submissions.

``build_app`` is the factory both ``gamut space`` (local result folders) and ``space/app.py``
(a Hugging Face Space, folders synced with the hub) call. Sign-in exists only inside a Space:
outside one, a ``gr.LoginButton`` needs a hub token to even build, so locally every
submission is made as the user "local".

Safety: every user-supplied string reaches the page either through a component that shows
text (Dataframe "str" cells, Textbox) or through ``html.escape`` (see failures.py); uploads
are parsed as JSON text, never executed or unpickled, and never name a path. Gradio's upload
route itself refuses a file over the limit while it streams in (``launch_options``).

The board ranks complete runs of one variant under one judge (multimodal and the primary judge
first); partial runs are listed apart, unranked. Anything in the results folder that is not a
readable result folder (a damaged run, a file, a link, a folder it may not read) is left out
with its reason, shown under the board, and never stops the Space; it is read again once it
changes. The analysis shows each model, judge and variant once and names the other runs.

With a hub requests repository, the queue is read again on every queue refresh and before
every submission (a worker elsewhere changes it), and a request whose push failed is sent
again with the next push or refresh.

Layout: :mod:`.data` (settings, loaded results, the board filter; no gradio), :mod:`.app` (the
Blocks and the handle the tabs share), one module per tab: :mod:`.board_tab`,
:mod:`.failures_tab`, :mod:`.analysis_tab`, :mod:`.submit_tab`.
"""

from gamut_hf.leaderboard.space.app import SpaceUI, build_app
from gamut_hf.leaderboard.space.data import SpaceConfig, SpaceData, filter_board, in_space, launch_options

__all__ = ["SpaceConfig", "SpaceData", "SpaceUI", "build_app", "filter_board", "in_space", "launch_options"]
