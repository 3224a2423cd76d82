"""The file names of a job artifacts build (`make package` → dist/package/), shared by packaging and CDK.

Pure Python on purpose: `scripts/package_jobs.py` imports it without loading the CDK.
"""

from __future__ import annotations

PACKAGE_ZIP = "winnow_jobs.zip"
"""The `jobs` package, zipped with `jobs/` at the root (for `--py-files`)."""
DEPS_ARCHIVE = "deps.tar.gz"
"""The pure-Python dependencies of requirements-jobs.txt, unpacked on EMR as `./deps` (`spark.archives`)."""
ENTRYPOINT = "emr_main.py"
"""The spark-submit entry point (from jobs/entrypoints/)."""
BUILD_INFO = "build.json"
"""What was built: the jobs version and the SHA-256 of every file."""
CONFIG = "config.json"
"""The env config's `jobs` section, added at deploy time (not part of the build)."""
BUILD_FILES = (PACKAGE_ZIP, DEPS_ARCHIVE, ENTRYPOINT, BUILD_INFO)
DEPS_DIR = "deps"
"""The folder name the dependencies archive is unpacked to in the driver's and executors' working dirs."""
