"""Training, data generation and evaluation for the embedded small DiffusionGemma model (issue 8).

Nothing here runs on the keystroke path: the language server only loads the finished checkpoint in
``backend/models/small/``. See ``docs/small-model.md`` for the commands that rebuild it.
"""
