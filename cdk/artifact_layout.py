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
"""What was built: the jobs version and the SHA-256 of every other file, by its path in the build."""
CONFIG = "config.json"
"""The env config's `jobs` section, added at deploy time (not part of the build)."""
IGLU_DIR = "iglu"
"""The repository's `iglu/` folder, copied as is (same relative paths): the Iglu resolver config and the embedded
schemas the shred job looks entity schemas up in, deployed with the code so runs never depend on a registry."""
IGLU_RESOLVER = f"{IGLU_DIR}/resolver.json"
"""The resolver config (its embedded repository `path` is relative to it); `jobs.shred.iglu_config` of
configs/dev.json and configs/prod.json names it relative to `config.json`, which lies at the build's root."""
BUILD_FILES = (PACKAGE_ZIP, DEPS_ARCHIVE, ENTRYPOINT, BUILD_INFO, IGLU_RESOLVER)
"""The files every build has (paths relative to the build folder); a build also holds every other file under
`IGLU_DIR`."""
DEPS_DIR = "deps"
"""The folder name the dependencies archive is unpacked to in the driver's and executors' working dirs."""
