package config

// FormatDuration exposes formatDuration to tests.
var FormatDuration = formatDuration
