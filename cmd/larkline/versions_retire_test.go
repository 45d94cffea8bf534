package main

import (
	"context"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// laggingDeletes is a kfake broker that acknowledges a topic deletion at once but
// keeps listing the topic in its metadata until it has answered afterMetadata more
// metadata requests, as a real broker's metadata may trail the controller; with
// afterMetadata < 0 it never deletes.
func laggingDeletes(t *testing.T, topic string, afterMetadata int32) (*kgo.Client, *kadm.Client) {
	t.Helper()
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	client := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kf.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	var (
		accepted atomic.Bool
		lists    atomic.Int32
		release  = make(chan struct{})
		once     sync.Once
	)
	kf.ControlKey(int16(kmsg.DeleteTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
		kf.KeepControl()
		select {
		case <-release:
			return nil, nil, false // the delayed deletion itself
		default:
		}
		r := req.(*kmsg.DeleteTopicsRequest)
		resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
		names := append([]string(nil), r.TopicNames...)
		for _, tp := range r.Topics {
			if tp.Topic != nil {
				names = append(names, *tp.Topic)
			}
		}
		for _, n := range names {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic = kmsg.StringPtr(n)
			resp.Topics = append(resp.Topics, rt)
		}
		accepted.Store(true)
		return resp, nil, true
	})
	late := kadm.NewClient(client())
	kf.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		kf.KeepControl()
		if afterMetadata >= 0 && accepted.Load() && lists.Add(1) > afterMetadata {
			once.Do(func() {
				close(release)
				go func() { _, _ = late.DeleteTopics(context.Background(), topic) }()
			})
		}
		return nil, nil, false
	})
	cl := client()
	return cl, kadm.NewClient(cl)
}

// listed asks the broker (not the client's metadata cache) whether it lists topic.
func listed(t *testing.T, cl *kgo.Client, topic string) bool {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0
}

// TestRetireWaitsUntilTopicsAreGone: retire returns only once the broker no longer
// lists the topics it deleted, so a second retire, or a list, right after it finds
// nothing (test/e2e TestVersionsSideBySide met the lag on the real broker).
func TestRetireWaitsUntilTopicsAreGone(t *testing.T) {
	const topic = "larkline-windows-v1-table"
	cl, adm := laggingDeletes(t, topic, 3)
	timeout := time.Minute
	c := &versionsCmd{cl: cl, adm: adm, out: io.Discard, f: versionsFlags{timeout: &timeout}}
	if _, err := adm.DeleteTopics(t.Context(), topic); err != nil {
		t.Fatal(err)
	}
	if err := c.waitTopicsGone(t.Context(), []string{topic}); err != nil {
		t.Fatalf("wait: %v", err)
	}
	if listed(t, cl, topic) {
		t.Fatal("the wait returned while the broker still lists the topic")
	}
}

func TestRetireSaysWhichTopicsStayListed(t *testing.T) {
	const topic = "larkline-windows-v1-loop"
	cl, adm := laggingDeletes(t, topic, -1)
	timeout := 500 * time.Millisecond
	c := &versionsCmd{cl: cl, adm: adm, out: io.Discard, f: versionsFlags{timeout: &timeout}}
	if _, err := adm.DeleteTopics(t.Context(), topic); err != nil {
		t.Fatal(err)
	}
	err := c.waitTopicsGone(t.Context(), []string{topic})
	if err == nil || !strings.Contains(err.Error(), topic) || !strings.Contains(err.Error(), "still listed") {
		t.Fatalf("wait on a topic that never goes: %v, want an error naming it", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.waitTopicsGone(ctx, []string{topic}); err == nil {
		t.Fatal("a cancelled wait returned nil")
	}
}
