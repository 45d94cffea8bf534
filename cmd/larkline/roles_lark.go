package main

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/lark/bindings"
	"github.com/larkline/larkline/connectors/lark/chats"
	"github.com/larkline/larkline/connectors/lark/ingest"
	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/connectors/lark/reconcile"
	"github.com/larkline/larkline/internal/store"
)

// larkStack is what the ingest and reconcile roles share in one process: one SDK
// API client (one tenant token), one normalizer, one binding resolver, one contacts cache
// and one evidence producer.
type larkStack struct {
	client   *larkapi.Client
	norm     *normalize.Normalizer
	resolver *bindings.Resolver
	contacts *ingest.Contacts
	producer *kgo.Client
	store    *store.Store
}

// lark returns the process's Lark stack, building it on first use. The shared
// components (resolver, contacts, producer) are returned only to the first caller, so
// exactly one role runs and closes them. Roles are built one after another.
func (rt *runtime) lark(ctx context.Context) (*larkStack, []component, error) {
	if rt.larkStack != nil {
		return rt.larkStack, nil, nil
	}
	st, err := rt.store(ctx)
	if err != nil {
		return nil, nil, err
	}
	client, err := rt.larkClient()
	if err != nil {
		return nil, nil, err
	}
	norm, err := normalize.New(rt.opts.normalize)
	if err != nil {
		return nil, nil, err
	}
	bo := rt.opts.bindings
	bo.Source, bo.Logger, bo.Registry = st, rt.log, rt.reg
	res, err := bindings.New(bo)
	if err != nil {
		return nil, nil, err
	}
	co := rt.opts.contacts
	co.Directory, co.Logger, co.Registry = client, rt.log, rt.reg
	contacts, err := ingest.NewContacts(co)
	if err != nil {
		return nil, nil, err
	}
	producer, err := newClient(rt.opts.kafkaFor("lark"))
	if err != nil {
		return nil, nil, err
	}
	s := &larkStack{client: client, norm: norm, resolver: res, contacts: contacts, producer: producer, store: st}
	rt.larkStack = s
	comps := []component{res, contacts, held(producer.Close)}
	return s, comps, nil
}

// larkClient is the process's one Lark Open API client (one tenant token).
func (rt *runtime) larkClient() (*larkapi.Client, error) {
	if rt.client == nil {
		// The SDK logs through larkline's logger and its sanitizer (issue #19): not
		// its own default logger on stdout, and never bodies, only codes.
		o := rt.opts.larkSDK
		o.Logger = rt.log.With("component", "lark.client")
		cl, err := larkapi.New(larkapi.NewSDK(o))
		if err != nil {
			return nil, err
		}
		rt.client = cl
	}
	return rt.client, nil
}

// chatGuard is the process's one chat type check (the chat info API, cached),
// shared by reconciliation and the binding paths so that they count into the same
// metric. It needs the Lark app's credentials.
func (rt *runtime) chatGuard() (*chats.Guard, error) {
	if rt.chats != nil {
		return rt.chats, nil
	}
	if rt.opts.larkMissing != nil {
		return nil, fmt.Errorf("the chat type check (p2p chats are refused) calls Lark: %w", rt.opts.larkMissing)
	}
	src, err := rt.larkClient()
	if err != nil {
		return nil, err
	}
	g, err := chats.New(chats.Options{Source: src, Logger: rt.log, Registry: rt.reg})
	if err != nil {
		return nil, err
	}
	rt.chats = g
	return g, nil
}

// buildIngest serves Lark events: the webhook on the ops server, or the long
// connection, as lark.mode says.
func buildIngest(ctx context.Context, rt *runtime) ([]component, error) {
	if !rt.opts.ingestOn {
		return nil, fmt.Errorf("event ingestion is disabled (services.workspace.timeline.lark.enabled and eventIngestionEnabled)")
	}
	s, comps, err := rt.lark(ctx)
	if err != nil {
		return nil, err
	}
	ing, err := ingest.New(ingest.Options{
		Normalizer: s.norm, Resolver: s.resolver, Holders: s.store, Producer: s.producer, Codec: rt.codecs.Evidence,
		Topic: rt.opts.topics.Evidence, Names: s.contacts, Messages: s.client,
		Logger: rt.log, Registry: rt.reg,
	})
	if err != nil {
		return nil, err
	}
	if lo := rt.opts.longConn; lo != nil {
		o := *lo
		o.Ingester, o.Logger, o.Registry = ing, rt.log, rt.reg
		lc, err := ingest.NewLongConn(o)
		if err != nil {
			return nil, err
		}
		return append(comps, lc), nil
	}
	o := rt.opts.webhook
	o.Ingester = ing
	wh, err := ingest.NewWebhook(o)
	if err != nil {
		return nil, err
	}
	if err := rt.hookSrv.Handle("POST "+rt.opts.webhookPath, wh); err != nil {
		return nil, err
	}
	return comps, nil
}

// buildReconcile runs the periodic history reconciliation (design §8).
func buildReconcile(ctx context.Context, rt *runtime) ([]component, error) {
	if !rt.opts.reconcileOn {
		return nil, fmt.Errorf("reconciliation is disabled (services.workspace.timeline.lark.enabled and reconciliationEnabled)")
	}
	r, comps, err := newReconciler(ctx, rt)
	if err != nil {
		return nil, err
	}
	rt.reconciler = r
	return append(comps, r), nil
}

func newReconciler(ctx context.Context, rt *runtime) (*reconcile.Reconciler, []component, error) {
	s, comps, err := rt.lark(ctx)
	if err != nil {
		return nil, nil, err
	}
	hist := s.client
	guard, err := rt.chatGuard()
	if err != nil {
		return nil, nil, err
	}
	o := rt.opts.reconcile
	o.Store, o.Eligibility, o.Chats, o.History, o.Normalizer, o.Producer = s.store, s.resolver, guard, hist, s.norm, s.producer
	o.EvidenceCodec, o.CheckpointCodec, o.Names = rt.codecs.Evidence, rt.codecs.Checkpoint, s.contacts
	o.Logger, o.Registry = rt.log, rt.reg
	r, err := reconcile.New(o)
	if err != nil {
		return nil, nil, err
	}
	return r, comps, nil
}
