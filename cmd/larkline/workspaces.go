package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/larkline/larkline/connectors/workspaces"
	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/store"
)

// runWorkspaces is `larkline workspaces put|status|get|publish` and runBind is
// `larkline bind add|remove|list`: the same operations as the admin API, against
// Postgres directly (publish goes through the Kafka feed instead).
func runWorkspaces(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, args, err := subcommand("workspaces", workspacesSubs, args, stderr)
	if err != nil {
		return err
	}
	fs, path := newFlags("workspaces "+sub, stderr)
	id := fs.String("id", "", "workspace id")
	typ := fs.String("type", "incident", "workspace type (put)")
	status := fs.String("status", "firing", "status: firing, recovered or archived (put, status)")
	created := fs.String("created-at", "", "creation time, RFC 3339 (put; default now)")
	file := fs.String("file", "-", "JSON workspace record to publish, - for stdin (publish)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	if sub == "publish" {
		return publishWorkspace(ctx, cfg, *file, stdout)
	}
	if err := cfg.Require("postgres.dsn"); err != nil {
		return err
	}
	ws, err := workspaces.ParseWorkspaceID(*id)
	if err != nil {
		return fmt.Errorf("%w: --id: %v", errUsage, err)
	}
	admin, closeFn, err := openAdmin(ctx, cfg, false)
	if err != nil {
		return err
	}
	defer closeFn()
	switch sub {
	case "put":
		st, err := workspaces.ParseStatus(*status)
		if err != nil {
			return err
		}
		at := time.Now().UTC()
		if *created != "" {
			if at, err = time.Parse(time.RFC3339, *created); err != nil {
				return fmt.Errorf("%w: --created-at: %v", errUsage, err)
			}
		}
		w, outcome, err := admin.PutWorkspace(ctx, workspaces.WorkspaceSpec{ID: ws, Type: *typ, Status: st, CreatedAt: at})
		if err != nil {
			return err
		}
		return printJSON(stdout, map[string]any{"outcome": outcome.String(), "workspace": w})
	case "status":
		st, err := workspaces.ParseStatus(*status)
		if err != nil {
			return err
		}
		w, changed, err := admin.SetStatus(ctx, ws, st)
		if err != nil {
			return err
		}
		return printJSON(stdout, map[string]any{"changed": changed, "workspace": w})
	case "get":
		d, err := admin.GetWorkspace(ctx, ws)
		if err != nil {
			return err
		}
		return printJSON(stdout, d)
	}
	return fmt.Errorf("%w: unknown subcommand %q (put, status, get, publish)", errUsage, sub)
}

func runBind(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, args, err := subcommand("bind", bindSubs, args, stderr)
	if err != nil {
		return err
	}
	fs, path := newFlags("bind "+sub, stderr)
	wsFlag := fs.String("workspace", "", "workspace id (add, remove)")
	chatFlag := fs.String("chat", "", "Lark chat id, oc_…")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	required := []string{"postgres.dsn"}
	if sub == "add" {
		// the chat's type is checked with Lark: single (p2p) chats are refused
		required = append(required, "lark.appID", "lark.appSecret")
	}
	cfg, err := loadConfig(*path, required...)
	if err != nil {
		return err
	}
	chat, err := workspaces.ParseChatID(*chatFlag)
	if err != nil {
		return fmt.Errorf("%w: --chat: %v", errUsage, err)
	}
	admin, closeFn, err := openAdmin(ctx, cfg, sub == "add")
	if err != nil {
		return err
	}
	defer closeFn()
	if sub == "list" {
		bs, err := admin.BindingsOfChat(ctx, chat)
		if err != nil {
			return err
		}
		return printJSON(stdout, bs)
	}
	ws, err := workspaces.ParseWorkspaceID(*wsFlag)
	if err != nil {
		return fmt.Errorf("%w: --workspace: %v", errUsage, err)
	}
	switch sub {
	case "add":
		added, err := admin.Bind(ctx, ws, chat)
		if err != nil {
			return err
		}
		return printJSON(stdout, map[string]any{"added": added, "workspace": ws, "chat": chat})
	case "remove":
		if err := admin.Unbind(ctx, ws, chat); err != nil {
			return err
		}
		return printJSON(stdout, map[string]any{"removed": true, "workspace": ws, "chat": chat})
	}
	return fmt.Errorf("%w: unknown subcommand %q (add, remove, list)", errUsage, sub)
}

// openAdmin opens the admin operations on Postgres; checkChats adds the chat type
// check against the Lark chat info API (bind add).
func openAdmin(ctx context.Context, cfg *config.Config, checkChats bool) (*workspaces.Admin, func(), error) {
	log, err := newLogger(cfg, os.Stderr)
	if err != nil {
		return nil, nil, err
	}
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	st, err := store.New(pool)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	opts := workspaces.AdminOptions{Logger: log}
	if checkChats {
		rt := &runtime{opts: newRoleOptions(cfg), log: log}
		if opts.Chats, err = rt.chatGuard(); err != nil {
			pool.Close()
			return nil, nil, err
		}
	}
	admin, err := workspaces.NewAdmin(st, opts)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return admin, pool.Close, nil
}

func publishWorkspace(ctx context.Context, cfg *config.Config, file string, stdout io.Writer) error {
	in := io.Reader(os.Stdin)
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	rec, err := workspaces.DecodeRecordJSON(in)
	if err != nil {
		return err
	}
	codecs, err := newCodecs(cfg)
	if err != nil {
		return err
	}
	pub, err := workspaces.NewPublisher(workspaces.PublisherOptions{
		Kafka: kafkaOptions(cfg, "workspaces-publish").opts, Topic: cfg.Kafka.Topics.Workspaces, Codec: codecs.Workspace,
	})
	if err != nil {
		return err
	}
	defer pub.Close()
	at, err := pub.Publish(ctx, rec)
	if err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"workspace": rec.ID, "version": rec.Version, "topic": at.Topic, "partition": at.Partition, "offset": at.Offset})
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
