package windows

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/kafka"
)

// The publisher emits closed records from the group table's changelog, never from
// a callback. Goka writes a callback's table value to local storage first and to the
// changelog asynchronously, independently of its emits: a record emitted by the
// callback that marked its window closing could reach the closed-window topic while
// the write that froze the window's fields is lost in a crash, and the window would
// then be closed again from other state, with another record. A window's closing
// fields in the changelog, by contrast, are written once: a lost write is never in
// the changelog, a written one is never replaced (a later value of the chat only
// keeps them or drops the window once it is read back). Every record the publisher
// builds from the changelog is therefore byte-identical to every other copy.
//
// A close callback marks its write with the header HeaderAnnounce (the starts of the
// windows it closed or re-announces); other writes carry no header and are skipped
// without decoding. The publisher reads the changelog in its own consumer group,
// produces the records of each poll, waits for their acknowledgement and only then
// commits: at least once, in changelog order (so oldest first per chat), duplicates
// identical. A write compacted away before the publisher read it is announced again
// by the scan (Options.ReemitAfter), as is one whose record was lost.

// HeaderAnnounce is the table-write header that lists the windows (their starts,
// varint unix ms) whose closed records the publisher emits from this value.
const HeaderAnnounce = "larkline-announce"

func encodeStarts(starts []int64) []byte {
	b := make([]byte, 0, 6*len(starts))
	for _, s := range starts {
		b = binary.AppendVarint(b, s)
	}
	return b
}

func decodeStarts(b []byte) ([]int64, error) {
	var out []int64
	for len(b) > 0 {
		v, n := binary.Varint(b)
		if n <= 0 || len(out) >= maxStateItems {
			return nil, fmt.Errorf("%w: announce header", ErrStateFormat)
		}
		out = append(out, v)
		b = b[n:]
	}
	return out, nil
}

// PublisherGroup is the consumer group of a processor version's publisher.
func PublisherGroup(prefix, version string) string {
	return string(GroupName(prefix, version)) + "-publisher"
}

// publisherRetry bounds the backoff between failed produce or commit rounds.
const (
	publisherRetryMin = 200 * time.Millisecond
	publisherRetryMax = 10 * time.Second
)

// runPublisher consumes the changelog until ctx ends. It returns nil when ctx ended,
// or an error when its client cannot be made.
func (p *Processor) runPublisher(ctx context.Context) error {
	table := string(GroupName(p.opts.GroupPrefix, p.opts.ProcessorVersion)) + "-table"
	gopts, err := kafka.GroupConsumerOptions(kafka.GroupConsumer{
		Group: PublisherGroup(p.opts.GroupPrefix, p.opts.ProcessorVersion), Topics: []string{table},
	})
	if err != nil {
		return fmt.Errorf("windows: publisher: %w", err)
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, p.opts.Client...), append(gopts, kgo.BlockRebalanceOnPoll())...)...)
	if err != nil {
		return fmt.Errorf("windows: publisher client: %w", err)
	}
	defer func() {
		// A poll blocks rebalances (BlockRebalanceOnPoll) until allowed, leaving too:
		// nothing polled is uncommitted here, so allow before leaving.
		cl.AllowRebalance()
		lctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = cl.LeaveGroupContext(lctx)
		cl.Close()
	}()
	wait := publisherRetryMin
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		failed := false
		fs.EachError(func(t string, part int32, err error) {
			failed = true
			p.log.Warn("publisher fetch failed; retrying", "topic", t, "partition", part, "err", err)
		})
		if failed && fs.NumRecords() == 0 {
			// a fetch error franz-go does not retry itself (authorization, say): back off
			p.m.publishFailures.Inc()
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, publisherRetryMax)
			cl.AllowRebalance()
			continue
		}
		var recs, out []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			recs = append(recs, r)
			out = append(out, p.announced(r)...)
		})
		// A round is produced and committed whole, or retried whole: the records are
		// byte-identical, so a retried produce only adds copies.
		for ctx.Err() == nil {
			err := p.publishRound(ctx, cl, recs, out)
			if err == nil {
				wait = publisherRetryMin
				break
			}
			p.m.publishFailures.Inc()
			p.log.Warn("publishing closed records failed; retrying", "records", len(out), "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, publisherRetryMax)
		}
		cl.AllowRebalance()
	}
	return nil
}

// publishRound produces the round's closed records, waits for them, then commits the
// changelog records they came from.
func (p *Processor) publishRound(ctx context.Context, cl *kgo.Client, recs, out []*kgo.Record) error {
	if len(out) > 0 {
		if err := cl.ProduceSync(ctx, out...).FirstErr(); err != nil {
			return fmt.Errorf("producing %d closed records: %w", len(out), err)
		}
		for _, r := range out {
			p.m.closed.WithLabelValues(string(r.Headers[1].Value)).Inc()
			p.m.closedBytes.Observe(float64(len(r.Key) + len(r.Value)))
		}
	}
	if len(recs) > 0 {
		if err := cl.CommitRecords(ctx, recs...); err != nil {
			return fmt.Errorf("committing the publisher's changelog offsets: %w", err)
		}
	}
	return nil
}

// announced builds the closed records one changelog record announces.
func (p *Processor) announced(r *kgo.Record) []*kgo.Record {
	var hdr []byte
	found := false
	for _, h := range r.Headers {
		if h.Key == HeaderAnnounce {
			hdr, found = h.Value, true
		}
	}
	if !found || r.Value == nil {
		return nil
	}
	starts, err := decodeStarts(hdr)
	var c *chatValue
	if err == nil {
		c, err = decodeChat(r.Value)
	}
	if err != nil {
		// Our own write does not decode: a bug. The window is announced again by the
		// scan once the state is fixed; nothing is emitted from bytes we cannot read.
		p.m.publishFailures.Inc()
		p.log.Error("changelog value does not decode; not published", "chat_key", string(r.Key),
			"partition", r.Partition, "offset", r.Offset, "err", err)
		return nil
	}
	var out []*kgo.Record
	for _, s := range starts {
		i, ok := c.find(s)
		if !ok || c.Open[i].Status != statusClosing {
			continue
		}
		w := &c.Open[i]
		rec, err := p.mach.record(string(r.Key), r.Partition, w)
		var b []byte
		if err == nil {
			cctx, cancel := context.WithTimeout(context.Background(), decodeTimeout)
			b, err = p.opts.Codecs.ClosedWindow.Encode(cctx, rec)
			cancel()
		}
		if err != nil {
			p.m.publishFailures.Inc()
			p.log.Error("closed record not built; announced again by the scan", "chat_key", string(r.Key),
				"window_start", msTime(s), "err", err)
			continue
		}
		p.m.closedEvidence.Observe(float64(w.Versions))
		p.log.Debug("window closed", "chat_key", string(r.Key), "window_start", msTime(s),
			"versions", w.Versions, "evidence_end_offset", w.High+1, "oversized", w.Oversized)
		out = append(out, &kgo.Record{
			Topic: p.opts.ClosedTopic, Key: r.Key, Value: b,
			Headers: []kgo.RecordHeader{
				{Key: HeaderProcessorVersion, Value: []byte(p.opts.ProcessorVersion)},
				{Key: "larkline-close-reason", Value: []byte(rec.Reason)},
			},
		})
	}
	return out
}
