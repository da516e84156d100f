"""nbgrader configuration for the JAX & XLA course.

The course root is the folder of this file: source/, release/, submitted/,
autograded/, feedback/ and gradebook.db live beside it (nbgrader's default layout).
"""
import os

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)

c.CourseDirectory.course_id = "jax-xla"
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.ignore = [
    ".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".DS_Store",
]

# The grader's settings (grader/config.py documents each): `python -m autograder grade`
# (make autograde) reads them here. A JAX cell that compiles a model can take a few
# seconds on a 2-core laptop; 60 s leaves room without letting a hung cell stall a batch.
c.Grading.cell_timeout = 60
c.Grading.notebook_timeout = 600
c.Grading.memory_mb = 3072
c.Grading.text_limit = 100_000
c.Grading.record_chunk = 25
# Submissions judged per program-judge sandbox: four save three JAX starts of four.
c.Grading.judge_batch = 4

# Plain nbgrader (nbgrader autograde, validate) uses the same per-cell limit.
c.Execute.timeout = c.Grading.cell_timeout
c.Execute.interrupt_on_timeout = True

# Test cells are all-or-nothing: a value a test cell displays (a check may return
# the student's own float) is never read as partial credit. This is nbgrader's
# default autograde list with NoDisplayCredit inserted before SaveAutoGrades.
c.Autograde.autograde_preprocessors = [
    "nbgrader.preprocessors.Execute",
    "nbgrader.preprocessors.IgnorePattern",
    "grader.nbgrader_plugins.NoDisplayCredit",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]

# `python -m autograder grade` (make autograde) runs every submission in a sandbox
# and judges it outside (grader/pipeline.py); it then calls nbgrader autograde
# with JAXCOURSE_BUNDLES set, and nbgrader records those verdicts instead of
# running student code itself. Without the variable, nbgrader executes as usual.
if os.environ.get("JAXCOURSE_BUNDLES"):
    c.Autograde.autograde_preprocessors = [
        "grader.nbgrader_plugins.TrustedReplay",
        "grader.nbgrader_plugins.NoDisplayCredit",
        "nbconvert.preprocessors.ClearMetadataPreprocessor",
        "nbgrader.preprocessors.LimitOutput",
        "grader.nbgrader_plugins.SaveTrustedGrades",
        "nbgrader.preprocessors.AssignLatePenalties",
        "nbgrader.preprocessors.CheckCellMetadata",
    ]

# Put back graded cells a student deleted, instead of failing the notebook.
c.OverwriteCells.add_missing_cells = True

# nbgrader scores any stderr output in a test cell as a failure. The autograder's
# checks never write to stderr, but a library may (a Python warning, an absl log
# line from XLA's C++ side). Drop exactly those lines; errors are not stream
# output, so a real failure is never hidden by this.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = (
    r"(?m)^(.*:\d+: \w*Warning: |[WIE]\d{4} [\d:.]+ +\d+ [\w./-]+:\d+\] )"
)

# Feedback shows each test's message, never hidden test code (the hidden region,
# nor the traceback lines around a failing hidden check).
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "grader.nbgrader_plugins.HideHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]

# The stub students see in place of a solution.
c.ClearSolutions.code_stub = {
    "python": "# YOUR CODE HERE\nraise NotImplementedError()",
}
