"""The Space's CSS, for every screen from a phone (400 px) to a desktop: passed to ``launch``
(``css`` and ``head``) with :func:`gamut_hf.leaderboard.space.data.launch_options`, as gradio 6
takes it."""

SPACE_CSS = """
/* A table header never breaks inside a word ("ran k", "si ze"): a column is at least as wide as
   its header's longest word, and words wrap only between them. */
.gamut-board th, .gamut-board th * {
    word-break: keep-all;
    overflow-wrap: normal;
    hyphens: none;
}
/* The title a little tighter than gradio's: the paper's 14 models fit the first screen of a
   laptop (1400 x 900). */
#space-header h1 { margin-bottom: 4px; }
#space-header p { margin: 0; }
/* The line saying what a board ranks sits beside its search box, or above it where both do not fit. */
.gamut-board .header-row { flex-wrap: wrap; }
/* On a phone, rows marked gamut-stack (the variant and the judge; the failure browser's image and text, its two answers)
   put their parts one above the other instead of squeezing each into a narrow column. */
@media (max-width: 720px) {
    .gamut-stack { flex-direction: column !important; }
    .gamut-stack > * { min-width: 100% !important; }
}
"""

# Outside the app's own elements, which ``css`` cannot reach (gradio scopes it to them): on a
# phone the page keeps 8 px at its sides instead of 32, room for another column of the board.
SPACE_HEAD = """<style>
@media (max-width: 720px) {
    .gradio-container > .main { padding-left: 8px !important; padding-right: 8px !important; }
}
</style>"""
