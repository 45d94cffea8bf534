package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/larkline/larkline/internal/config"
)

// optionField is the field at a Go path ("Producer.Linger"; "Brokers", promoted
// from an embedded struct) of the options v, or false.
func optionField(v reflect.Value, path string) (reflect.Value, bool) {
	for seg := range strings.SplitSeq(path, ".") {
		if v.Kind() != reflect.Struct {
			return reflect.Value{}, false
		}
		if v = v.FieldByName(seg); !v.IsValid() {
			return reflect.Value{}, false
		}
	}
	return v, true
}

// configField is the settable value of a key path in cfg, found by the yaml tags.
func configField(cfg *config.Config, path string) (reflect.Value, bool) {
	v := reflect.ValueOf(cfg).Elem()
next:
	for seg := range strings.SplitSeq(path, ".") {
		for i := range v.NumField() {
			if name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ","); name == seg {
				v = v.Field(i)
				continue next
			}
		}
		return reflect.Value{}, false
	}
	return v, true
}

// Every key a mapping records is a key of the configuration, and every field it
// records one of the stage's options: a misspelt key, or a field path the stage
// would not name, goes red here.
func TestMappedKeysAreConfigKeysAndFields(t *testing.T) {
	all, err := config.Keys()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, k := range all {
		known[k.Path] = true
	}
	for _, s := range stages {
		t.Run(s.name, func(t *testing.T) {
			opts, keys, _ := s.build(config.Default())
			if len(keys) == 0 {
				t.Fatal("the mapping records no keys")
			}
			for field, key := range keys {
				if !known[key] {
					t.Errorf("%s: %q is not a configuration key", field, key)
				}
				path, _, _ := strings.Cut(field, "=") // a list field keyed by value
				if _, ok := optionField(reflect.ValueOf(opts), path); !ok {
					t.Errorf("%s (key %s) is not a field of %T", field, key, opts)
				}
			}
		})
	}
}

// Each key a mapping records sets the field it is recorded for: changing that
// key alone changes the field. A key written next to the value of another key
// goes red here.
func TestEachMappedKeySetsItsField(t *testing.T) {
	base := config.Default()
	// the switches some fields also depend on
	base.Services.Workspace.Timeline.Lark.Enabled = true  // RequireCoverage
	base.Synthesis.Synthesizer = config.SynthesizerOpenAI // ChunkTimeout
	for _, s := range stages {
		t.Run(s.name, func(t *testing.T) {
			before, keys, _ := s.build(base)
			for field, key := range keys {
				c := base.Clone()
				v, ok := configField(c, key)
				if !ok {
					t.Errorf("%s: no key %s", field, key)
					continue
				}
				perturb(v)
				after, _, _ := s.build(c)
				path, _, _ := strings.Cut(field, "=")
				was, _ := optionField(reflect.ValueOf(before), path)
				now, ok := optionField(reflect.ValueOf(after), path)
				if !ok {
					t.Errorf("%s: no such field", field)
					continue
				}
				if reflect.DeepEqual(was.Interface(), now.Interface()) {
					t.Errorf("%s stays %v when %s changes: it is not set from that key", field, was, key)
				}
			}
		})
	}
}

// perturb changes a configuration value to another of its kind.
func perturb(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int16, reflect.Int32, reflect.Int64: // durations too
		v.SetInt(v.Int() + 1)
	case reflect.Float64:
		v.SetFloat(v.Float() + 1)
	case reflect.Slice:
		v.Set(reflect.Append(v, reflect.ValueOf("x").Convert(v.Type().Elem())))
	default:
		panic("perturb: unexpected kind " + v.Kind().String())
	}
}
