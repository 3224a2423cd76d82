"""spark-submit entry points for EMR Serverless: thin scripts around `jobs.runtime.cli.main`."""
