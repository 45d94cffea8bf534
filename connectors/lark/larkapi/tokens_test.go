package larkapi_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/schemas/ids"
)

// TestRefusedTokenIsFetchedAgain: after Lark refuses the cached tenant token (99991663:
// revoked, the app re-authorized), the call fails once, retryable, and the next call
// fetches a new token instead of sending the refused one until it expires.
func TestRefusedTokenIsFetchedAgain(t *testing.T) {
	srv := startLarktest(t, "oc_tokens")
	cli, err := larkapi.New(larkapi.NewSDK(larkapi.SDKOptions{AppID: srv.AppID(), AppSecret: "s3cret", OpenBaseURL: srv.URL()}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	get := func() error { _, err := cli.GetChat(ctx, ids.ChatID("oc_tokens")); return err }
	if err := get(); err != nil {
		t.Fatalf("first call: %v", err)
	}
	tokensBefore := srv.Calls(larktest.PathTenantToken)
	srv.RevokeTokens()
	err = get()
	var ae *larkapi.APIError
	if !errors.As(err, &ae) || ae.Code != larkapi.CodeTenantTokenBad || !larkapi.IsRetryable(err) {
		t.Fatalf("call with the revoked token: %v, want a retryable %d", err, larkapi.CodeTenantTokenBad)
	}
	if err := get(); err != nil {
		t.Fatalf("the call after a refused token still fails (the refused token was sent again): %v", err)
	}
	if n := srv.Calls(larktest.PathTenantToken) - tokensBefore; n != 1 {
		t.Fatalf("%d token requests after the revocation, want 1", n)
	}
}

// TestClientsBuiltWhileOthersCall: building SDK clients while others call Lark is
// race-free (-race is the verdict): the token cache is installed once, not by every
// NewSDK, and each client still gets its tokens through it.
func TestClientsBuiltWhileOthersCall(t *testing.T) {
	srv := startLarktest(t, "oc_concurrent")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cli, err := larkapi.New(larkapi.NewSDK(larkapi.SDKOptions{AppID: srv.AppID(), AppSecret: "s3cret", OpenBaseURL: srv.URL()}))
			if err == nil {
				_, err = cli.GetChat(context.Background(), ids.ChatID("oc_concurrent"))
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// startLarktest starts a larktest server (app secret s3cret, its own app id) whose
// scenario holds one group chat, and stops it when the test ends.
func startLarktest(t *testing.T, chat ids.ChatID) *larktest.Server {
	t.Helper()
	app := larktest.NewAppID()
	sc, err := larktest.NewScenario(larktest.App{AppID: app, BotOpenID: "ou_bot"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	if err := sc.AddEvent(larktest.DeliverOnce, larktest.Builder{AppID: app}.Text(
		larktest.Msg{ID: "om_1", Chat: chat, ChatType: "group", From: larktest.Author{OpenID: "ou_a"}, At: at}, "x")); err != nil {
		t.Fatal(err)
	}
	srv := larktest.StartForTest(t, larktest.Options{AppSecret: "s3cret", Scenario: sc, Now: func() time.Time { return at.Add(time.Hour) }})
	return srv
}
