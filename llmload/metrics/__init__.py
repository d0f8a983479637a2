"""Pure: one request's numbers (record), their catalog, histograms, stats tables, SLOs and agent tasks."""
