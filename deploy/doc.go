// Package deploy holds the files that run Parley under observation — the
// Prometheus scrape configuration and alerting rules, and the Grafana
// dashboard with its provisioning — and the tests that keep them honest.
//
// Layout:
//
//	prometheus/prometheus.yml                   scrape parley:8080/metrics, load alerts.yml
//	prometheus/alerts.yml                       alerting rules
//	prometheus/alerts_test.yaml                 promtool tests: every alert fires on its bad case
//	prometheus/healthy_test.yaml                promtool tests: none fires on a fresh, healthy replica
//	grafana/dashboards/parley.json              the Parley dashboard
//	grafana/provisioning/datasources/*.yml      Prometheus at http://prometheus:9090
//	grafana/provisioning/dashboards/*.yml       load dashboards from /var/lib/grafana/dashboards
//
// Mount deploy/prometheus at /etc/prometheus, deploy/grafana/provisioning at
// /etc/grafana/provisioning and deploy/grafana/dashboards at
// /var/lib/grafana/dashboards.
//
// The package has no code of its own. Its tests read every PromQL expression
// in the dashboard and the rules and fail when one names a metric that
// metrics.New does not declare, filters or groups by a label the metric does
// not have, leaves out the dashboard's $channel filter, or when a metric has
// no panel at all. Rename a metric in package metrics and these tests point
// at every query to update.
package deploy
