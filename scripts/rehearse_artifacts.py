"""`make rehearse`'s entry point (`python -m scripts.rehearse_artifacts --env dev`): run the built job artifacts the
way EMR Serverless and Lambda run them, each in a fresh venv. The rehearsal itself is the package scripts/rehearsal/
(its docstring says what is rehearsed and what is changed to run it locally).
"""

from __future__ import annotations

from scripts.rehearsal.run import main

if __name__ == "__main__":
    raise SystemExit(main())
