package main

import (
	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/processors/synthesis/openai"
)

// openaiOptions: the OpenAI-compatible model client.
func openaiOptions(cfg *config.Config) mapped[openai.Options] {
	c := cfg.Synthesis.OpenAI
	m, o := newMapped[openai.Options]()
	set(m, &o.BaseURL, "synthesis.openai.baseURL", c.BaseURL)
	set(m, &o.Model, "synthesis.openai.model", c.Model)
	set(m, &o.APIKey, "synthesis.openai.apiKey", c.APIKey.Value())
	set(m, &o.Timeout, "synthesis.openai.timeout", c.Timeout)
	set(m, &o.MaxRetries, "synthesis.openai.maxRetries", new(c.MaxRetries))
	set(m, &o.MaxOutputTokens, "synthesis.openai.maxOutputTokens", c.MaxOutputTokens)
	set(m, &o.PromptVersion, "synthesis.promptVersion", cfg.Synthesis.PromptVersion)
	set(m, &o.AllowInsecure, "allowInsecure", cfg.AllowInsecure)
	return *m
}
