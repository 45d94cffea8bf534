package windows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/kafka"
)

// A processor version's state (its open windows, closed marks, coverage) is only
// meaningful under the window length and grace it was built with: a window index
// under another length names other instants, and a different grace changes which
// evidence was on time. So the geometry is part of the version's state: it is kept
// in a one-partition compacted topic <group>-geometry, written by the first start of
// the version, and a start with another length or grace is refused with
// ErrGeometryChanged. Changing them is done by `larkline replay` to a new processor
// version, which rebuilds its state from the evidence topic (docs/decisions.md D23).

// ErrGeometryChanged means the processor version's state was built with another
// window length or grace than the options give.
var ErrGeometryChanged = errors.New("windows: window length or grace differs from the processor version's state")

// GeometryTopic is the topic holding the geometry of a processor version.
func GeometryTopic(prefix, version string) string {
	return GeometryTopicSpec(prefix, version, 1).Name
}

// GeometryTopicSpec is the geometry topic of a processor version
// (kafka.GeometryTopicSpec of its group).
func GeometryTopicSpec(prefix, version string, replication int16) kafka.TopicSpec {
	return kafka.GeometryTopicSpec(string(GroupName(prefix, version)), replication)
}

// geometry is the record of the geometry topic.
type geometry struct {
	WindowMS int64 `json:"window_ms"`
	GraceMS  int64 `json:"grace_ms"`
}

const geometryKey = "geometry"

// geometryTimeout bounds the geometry check at start.
const geometryTimeout = 30 * time.Second

// checkGeometry reads the version's geometry, writes it on the first start, and
// refuses a start whose Window or Grace differs.
func (p *Processor) checkGeometry(ctx context.Context, cl *kgo.Client) error {
	ctx, cancel := context.WithTimeout(ctx, geometryTimeout)
	defer cancel()
	spec := GeometryTopicSpec(p.opts.GroupPrefix, p.opts.ProcessorVersion, p.opts.TopicReplication)
	topic := spec.Name
	adm := kadm.NewClient(cl)
	if p.opts.CheckTopicsOnly {
		rep, err := kafka.CheckTopics(ctx, adm, []kafka.TopicSpec{spec})
		if err == nil && len(rep.Missing) > 0 {
			err = fmt.Errorf("missing (kafka.manageTopics is false: create it, see larkline topics print)")
		}
		if err == nil {
			err = rep.Err()
		}
		if err != nil {
			return fmt.Errorf("windows: checking the geometry topic %s: %w", topic, err)
		}
	} else if _, err := kafka.EnsureTopics(ctx, adm, []kafka.TopicSpec{spec}); err != nil {
		return fmt.Errorf("windows: creating the geometry topic %s: %w", topic, err)
	}
	want := geometry{WindowMS: p.opts.Window.Milliseconds(), GraceMS: p.opts.Grace.Milliseconds()}
	have, found, err := readGeometry(ctx, cl, adm, topic)
	if err != nil {
		return fmt.Errorf("windows: reading the geometry topic %s: %w", topic, err)
	}
	if found {
		if have != want {
			return fmt.Errorf("%w: processor version %s was built with synthesisWindow=%s and synthesisWindowCloseGrace=%s, "+
				"the configuration gives synthesisWindow=%s and synthesisWindowCloseGrace=%s; "+
				"keep them, or run `larkline replay` to a new windows.processorVersion to change them",
				ErrGeometryChanged, p.opts.ProcessorVersion, time.Duration(have.WindowMS)*time.Millisecond,
				time.Duration(have.GraceMS)*time.Millisecond, p.opts.Window, p.opts.Grace)
		}
		return nil
	}
	b, _ := json.Marshal(want)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(geometryKey), Value: b}).FirstErr(); err != nil {
		return fmt.Errorf("windows: writing the geometry of %s: %w", p.opts.ProcessorVersion, err)
	}
	return nil
}

// readGeometry reads the geometry topic to its end and returns its last record.
func readGeometry(ctx context.Context, cl *kgo.Client, adm *kadm.Client, topic string) (geometry, bool, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return geometry{}, false, err
	}
	end, ok := ends.Lookup(topic, 0)
	if !ok || end.Offset == 0 {
		return geometry{}, false, nil
	}
	rd, err := kgo.NewClient(append(cl.Opts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		return geometry{}, false, err
	}
	defer rd.Close()
	var g geometry
	found := false
	for {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return geometry{}, false, err
		}
		if err := fs.Err(); err != nil {
			return geometry{}, false, err
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) == geometryKey && r.Value != nil {
				var v geometry
				if json.Unmarshal(r.Value, &v) == nil {
					g, found = v, true
				}
			}
			done = done || r.Offset >= end.Offset-1
		})
		if done {
			return g, found, nil
		}
	}
}
