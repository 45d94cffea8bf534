package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"gopkg.in/yaml.v3"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/testenv"
)

// TestSecuredUnmanagedTopics is least privilege by choice (kafka.manageTopics:
// false, issue #32): the administrator creates every topic `larkline topics print
// --format strimzi` lists, the application's principal holds exactly the ACLs of
// docs/operations.md "Topics managed by the platform team" (Read, Write and
// DescribeConfigs on its prefixes, Read on its groups; no Create, no AlterConfigs),
// and the whole pipeline runs: topics ensure checks, the Goka window processor
// starts on the pre-created table and loop topics, and the scenario ends in
// synthesized entries with every invariant.
func TestSecuredUnmanagedTopics(t *testing.T) {
	s := testenv.SecuredKafka(t)
	u := newSecuredUser(t, s, "sasl_ssl")
	prefix := "e2e-" + randHex(4)
	acls := docACLsIn(t, "Topics managed by the platform team", u.principal, prefix+".", prefix)
	for _, a := range acls {
		if a.Operation == "Create" || a.Operation == "AlterConfigs" || a.Operation == "All" {
			t.Fatalf("the documented least-privilege ACLs grant %s", a)
		}
	}
	s.Grant(t, acls...)
	adminOpts := securedAdminOpts(t, s)
	p := newPipeline(t, pipelineOptions{Prefix: prefix, Brokers: u.brokers,
		Env:         append(append([]string(nil), u.env...), "LARKLINE_KAFKA__MANAGETOPICS=false"),
		KafkaClient: adminOpts, Timeout: 8 * time.Minute,
		Prepare: func(ctx context.Context, p *pipeline) {
			createPrintedTopics(ctx, t, adminOpts, p.cli(ctx, "topics", "print", "--format", "strimzi"))
		}})
	ctx := p.ctx
	p.deliver(ctx)
	g := p.finish(4 * time.Minute)
	if g.expected == 0 {
		t.Fatal("no evidence expected: the scenario proved nothing")
	}
	if r := p.restarts(); len(r) > 0 {
		t.Errorf("processes restarted: %v", r)
	}
}

// createPrintedTopics creates, as the administrator, the KafkaTopic resources of
// `topics print --format strimzi` (what the Strimzi topic operator would do).
func createPrintedTopics(ctx context.Context, t *testing.T, adminOpts []kgo.Opt, printed string) {
	t.Helper()
	cl, err := kgo.NewClient(adminOpts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var specs []kafka.TopicSpec
	dec := yaml.NewDecoder(strings.NewReader(printed))
	for {
		var kt struct {
			Kind string `yaml:"kind"`
			Spec struct {
				TopicName  string            `yaml:"topicName"`
				Partitions int32             `yaml:"partitions"`
				Replicas   int16             `yaml:"replicas"`
				Config     map[string]string `yaml:"config"`
			} `yaml:"spec"`
		}
		if err := dec.Decode(&kt); err != nil {
			break
		}
		if kt.Kind != "KafkaTopic" {
			t.Fatalf("topics print --format strimzi printed a %q", kt.Kind)
		}
		specs = append(specs, kafka.TopicSpec{Name: kt.Spec.TopicName, Partitions: kt.Spec.Partitions,
			Replication: kt.Spec.Replicas, Configs: kt.Spec.Config})
	}
	// EnsureTopics creates them and waits until every broker's metadata has them, as
	// the topic operator's status would tell.
	rep, err := kafka.EnsureTopics(ctx, kadm.NewClient(cl), specs)
	if err != nil {
		t.Fatalf("creating the printed topics as the administrator: %v", err)
	}
	n := len(rep.Created)
	if n != 8 {
		t.Fatalf("topics print listed %d topics, want 8 (5 of larkline, Goka's table and loop, the version's geometry):\n%s", n, printed)
	}
}
