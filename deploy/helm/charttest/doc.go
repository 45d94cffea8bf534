// Package charttest renders the Helm chart deploy/helm/larkline offline with the Helm
// Go library and checks every object it produces, decoded into its k8s.io/api type:
// each role in exactly one Deployment with probes and a PodDisruptionBudget, the
// ConfigMap loading with larkline's own configuration loader, the PrometheusRule equal
// to deploy/prometheus/alerts.yaml, the KafkaTopics equal to what larkline checks and
// the KafkaUser's ACLs equal to the documented ones. It is its own module so that
// Helm's and Kubernetes' dependencies stay out of larkline's: `make chart-test`.
package charttest
