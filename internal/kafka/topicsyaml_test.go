package kafka

import (
	"os"
	"strconv"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestTopicsYAMLMatchesDefaultTopicSpecs keeps deploy/kafka/topics.yaml, the operators'
// description of the topics, in step with the specs the code creates.
func TestTopicsYAMLMatchesDefaultTopicSpecs(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/kafka/topics.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Defaults struct {
			Partitions  int32 `yaml:"partitions"`
			Replication int16 `yaml:"replication"`
		} `yaml:"defaults"`
		Topics []map[string]any `yaml:"topics"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("topics.yaml: %v", err)
	}
	specs := DefaultTopicSpecs(DefaultTopicNames(), doc.Defaults.Partitions, doc.Defaults.Replication)
	if len(doc.Topics) != len(specs) {
		t.Fatalf("topics.yaml lists %d topics, DefaultTopicSpecs %d", len(doc.Topics), len(specs))
	}
	for i, s := range specs {
		y := doc.Topics[i]
		if y["name"] != s.Name {
			t.Fatalf("topic %d: yaml %v, code %s", i, y["name"], s.Name)
		}
		if y["why"] == nil || y["key"] == nil {
			t.Fatalf("%s: yaml lacks key or why", s.Name)
		}
		for k, want := range s.Configs {
			got, ok := y[k]
			if !ok {
				t.Fatalf("%s: yaml lacks %s (code: %s)", s.Name, k, want)
			}
			var gs string
			switch v := got.(type) {
			case int:
				gs = strconv.Itoa(v)
			case string:
				gs = v
			default:
				t.Fatalf("%s: yaml %s has type %T", s.Name, k, got)
			}
			if gs != want {
				t.Fatalf("%s: yaml %s = %s, code %s", s.Name, k, gs, want)
			}
		}
	}
}
