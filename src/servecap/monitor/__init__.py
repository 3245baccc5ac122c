"""Live monitoring of vLLM / SGLang servers: scrape ``/metrics``, typed snapshots, rates and
percentiles over a window, headroom against the plan, and the dashboards/alerts built from it."""
