package main

import (
	"github.com/larkline/larkline/connectors/lark/ingest"
	"github.com/larkline/larkline/internal/config"
)

// webhookOptions: the Lark event webhook.
func webhookOptions(cfg *config.Config) mapped[ingest.WebhookOptions] {
	m, o := newMapped[ingest.WebhookOptions]()
	set(m, &o.VerificationToken, "lark.verificationToken", cfg.Lark.VerificationToken.Value())
	set(m, &o.EncryptKey, "lark.encryptKey", cfg.Lark.EncryptKey.Value())
	set(m, &o.MaxTimestampSkew, "lark.maxTimestampSkew", cfg.Lark.MaxTimestampSkew)
	set(m, &o.URLVerification, "lark.urlVerification", cfg.Lark.URLVerification)
	return *m
}
