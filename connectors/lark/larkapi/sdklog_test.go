package larkapi

import (
	"strings"
	"testing"
)

func TestSDKLogIsSanitized(t *testing.T) {
	tests := []struct{ in, want string }{
		{"connected to wss://msg-frontier.feishu.cn/ws/v2?device_id=1&access_key=SECRET&ticket=T [conn_id=1]",
			"connected to wss://msg-frontier.feishu.cn/ws/v2?… [conn_id=1]"},
		{"receive unknown message, message_type: 1, message: the password is hunter2", "receive unknown message"},
		{"event request: header:map[],body:{\"text\":\"secret\"}", "event request"},
		{"connect failed, err: dial tcp 127.0.0.1:1: connect: connection refused", "connect failed, err: dial tcp 127.0.0.1:1: connect: connection refused"},
	}
	for _, tt := range tests {
		if got := sanitizeSDKLog(tt.in); got != tt.want {
			t.Errorf("sanitizeSDKLog(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := sanitizeSDKLog("handle event," + strings.Repeat("x", 1000)); len(got) > maxSDKLogBytes+len("…") {
		t.Errorf("long line kept %d bytes", len(got))
	}
}
