package config

import (
	"fmt"
	"io"
	"maps"
	"reflect"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// Redacted returns a deep copy of c in which every set secret is replaced by
// "[REDACTED]", safe to log or print. Origins are kept.
func (c *Config) Redacted() *Config {
	out := c.Clone()
	redactValue(reflect.ValueOf(out).Elem())
	return out
}

// Clone returns a deep copy of c.
func (c *Config) Clone() *Config {
	out := new(Config)
	deepCopy(reflect.ValueOf(out).Elem(), reflect.ValueOf(c).Elem())
	out.origins = maps.Clone(c.origins)
	return out
}

// deepCopy copies src into dst, duplicating slices (the only reference types in the
// exported part of Config).
func deepCopy(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Struct:
		for i := range src.NumField() {
			if dst.Type().Field(i).IsExported() {
				deepCopy(dst.Field(i), src.Field(i))
			}
		}
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			deepCopy(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	default:
		dst.Set(src)
	}
}

func redactValue(v reflect.Value) {
	switch {
	case v.Type() == secretType:
		if v.String() != "" {
			v.SetString(Redacted)
		}
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				redactValue(v.Field(i))
			}
		}
	case v.Kind() == reflect.Slice:
		for i := range v.Len() {
			redactValue(v.Index(i))
		}
	}
}

// WriteYAML writes the effective configuration as YAML in the file's shape, with
// durations as duration strings and every key present. Secrets are never written: a
// set secret is written as "" with the comment "redacted", so the output can be
// shown to people but does not round-trip secrets.
func (c *Config) WriteYAML(w io.Writer) error {
	idx, err := loadSchema()
	if err != nil {
		return fmt.Errorf("writing configuration: %w", err)
	}
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{
		yamlSection(reflect.ValueOf(c).Elem(), idx.root.children),
	}}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("writing configuration: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("writing configuration: %w", err)
	}
	return nil
}

func yamlSection(v reflect.Value, keys []*key) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode}
	for _, k := range keys {
		m.Content = append(m.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k.name},
			yamlValue(v.Field(k.index), k))
	}
	return m
}

func yamlValue(v reflect.Value, k *key) *yaml.Node {
	str := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
	switch k.kind {
	case kindSection:
		return yamlSection(v, k.children)
	case kindList:
		seq := &yaml.Node{Kind: yaml.SequenceNode}
		for i := range v.Len() {
			seq.Content = append(seq.Content, yamlSection(v.Index(i), k.children))
		}
		if len(seq.Content) == 0 {
			seq.Style = yaml.FlowStyle
		}
		return seq
	case kindStrings:
		seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for i := range v.Len() {
			seq.Content = append(seq.Content, str(v.Index(i).String()))
		}
		return seq
	case kindSecret:
		n := str("")
		if v.String() != "" {
			n.LineComment = "redacted"
		}
		return n
	case kindString:
		return str(v.String())
	case kindBool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v.Bool())}
	case kindInt:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(v.Int(), 10)}
	case kindFloat:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: strconv.FormatFloat(v.Float(), 'g', -1, 64)}
	case kindDuration:
		return str(formatDuration(time.Duration(v.Int())))
	}
	return str("")
}
