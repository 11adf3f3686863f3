"""Tests of the kgroup PySpark data source (kgroup.spark) and the jobs in spark_jobs/."""
