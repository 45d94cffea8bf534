package main

import (
	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/internal/config"
)

// normalizeOptions: the Lark message normalizer.
func normalizeOptions(cfg *config.Config) mapped[normalize.Options] {
	m, o := newMapped[normalize.Options]()
	set(m, &o.SelfAppID, "lark.appID", cfg.Lark.AppID)
	set(m, &o.SelfBotOpenID, "lark.botOpenID", cfg.Lark.BotOpenID)
	set(m, &o.MaxTextBytes, tl+"maxMessageTextBytes", cfg.Services.Workspace.Timeline.Lark.MaxMessageTextBytes)
	return *m
}
