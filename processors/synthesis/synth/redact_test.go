package synth

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	const pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1x9s\nq8J2kfjA93=\n-----END RSA PRIVATE KEY-----"
	tests := []struct {
		name string
		in   string
		want string
	}{
		// Secrets.
		{"pem block", "key is\n" + pem + "\nthanks", "key is\n[REDACTED:private_key]\nthanks"},
		{"pem cut off", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA", "[REDACTED:private_key]"},
		{"pgp block", "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQdGBF\n-----END PGP PRIVATE KEY BLOCK----- done", "[REDACTED:private_key] done"},
		{"postgres url password", "connect postgres://app:S3cr3t!@db-1.internal:5432/orders", "connect postgres://[REDACTED:credentials]@db-1.internal:5432/orders"},
		{"https url password", "https://deploy:hunter22@ci.example.com/job", "https://[REDACTED:credentials]@ci.example.com/job"},
		{"jwt", "cookie looks like eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U here",
			"cookie looks like [REDACTED:jwt] here"},
		{"bearer", "curl -H 'Authorization: Bearer abc123def456ghi789'", "curl -H 'Authorization: Bearer [REDACTED:token]'"},
		{"basic", "Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==", "Authorization: Basic [REDACTED:token]"},
		{"github token", "use ghp_1234567890abcdefghijklmnopqrstuvwxyzAB now", "use [REDACTED:token] now"},
		{"slack token", "xoxb-123456789012-abcdefABCDEF", "[REDACTED:token]"},
		{"openai key", "OPENAI key sk-proj-abcDEF1234567890ghijKLMN", "OPENAI key [REDACTED:token]"},
		{"lark tenant token", "tenant token t-g1044ghJRUIJJ5ELPFGBLNCEUMW4GKJJ6XNIGLZ4 expired", "tenant token [REDACTED:token] expired"},
		{"aws access key", "leaked AKIAIOSFODNN7EXAMPLE in logs", "leaked [REDACTED:aws_key] in logs"},
		{"env password", "set DB_PASSWORD=Tr0ub4dor&3 and restart", "set DB_PASSWORD=[REDACTED:secret] and restart"},
		{"api key colon", "api_key: 9f8e7d6c5b4a", "api_key: [REDACTED:secret]"},
		{"json secret", `{"client_secret": "abc def", "x": 1}`, `{"client_secret": [REDACTED:secret], "x": 1}`},
		{"query token", "GET /hook?token=abc123&user=1", "GET /hook?token=[REDACTED:secret]"},
		{"password is", "the password is hunter2, rotate it", "the password is [REDACTED:secret], rotate it"},
		{"chinese password", "数据库密码是Abc12345，请尽快修改", "数据库密码是[REDACTED:secret]，请尽快修改"},
		{"chinese secret colon", "密钥：k9s8d7f6", "密钥：[REDACTED:secret]"},
		{"aws secret", "secret key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "secret key [REDACTED:secret]"},
		{"long hex", "hmac 5f4dcc3b5aa765d61d8327deb882cf99 mismatch", "hmac [REDACTED:secret] mismatch"},
		{"long base64", "value Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MEFCQ0RFRkdISUpL end", "value [REDACTED:secret] end"},

		// Contact details.
		{"email", "ping alice.chen+oncall@example.co.uk please", "ping [REDACTED:email] please"},
		{"cn mobile", "call me 13812345678", "call me [REDACTED:phone]"},
		{"cn mobile +86 split", "电话 +86 138-1234-5678 找我", "电话 [REDACTED:phone] 找我"},
		{"cn mobile in chinese", "手机13912345678有事打", "手机[REDACTED:phone]有事打"},
		{"intl", "UK desk +44 20 7946 0958", "UK desk [REDACTED:phone]"},
		{"us parens", "bridge (415) 555-0100", "bridge [REDACTED:phone]"},
		{"us dashes", "call 415-555-0100 now", "call [REDACTED:phone] now"},
		{"cn landline", "座机 010-62345678", "座机 [REDACTED:phone]"},
		{"ipv4", "node 10.12.3.4 is flapping", "node [REDACTED:ip] is flapping"},
		{"ipv4 with port", "redis at 192.168.1.20:6379", "redis at [REDACTED:ip]:6379"},
		{"ipv6", "peer 2001:db8::8a2e:370:7334 dropped", "peer [REDACTED:ip] dropped"},
		{"ipv6 link local", "bind fe80::1 only", "bind [REDACTED:ip] only"},

		// Ordinary incident language stays.
		{"times", "at 14:05:33 the p99 went from 120ms to 2.3s", "at 14:05:33 the p99 went from 120ms to 2.3s"},
		{"date and version", "2024-05-01 deploy of v2.31.4 (build 1.2.3.4.5)", "2024-05-01 deploy of v2.31.4 (build 1.2.3.4.5)"},
		{"percent and counts", "error rate +12.5% on 200 500 1000 requests", "error rate +12.5% on 200 500 1000 requests"},
		{"short sha", "reverted commit 3f2a9c1 from PR #4412", "reverted commit 3f2a9c1 from PR #4412"},
		{"uuid", "trace 123e4567-e89b-12d3-a456-426614174000", "trace 123e4567-e89b-12d3-a456-426614174000"},
		{"pod name", "pod checkout-service-7d9f8b6c5d-x2k4p OOMKilled", "pod checkout-service-7d9f8b6c5d-x2k4p OOMKilled"},
		{"plain url", "dashboard https://grafana.example.com/d/abc123/checkout?orgId=1", "dashboard https://grafana.example.com/d/abc123/checkout?orgId=1"},
		{"token prose", "the token expired and Bearer authentication failed", "the token expired and Bearer authentication failed"},
		{"mac address", "nic 00:1a:2b:3c:4d:5e", "nic 00:1a:2b:3c:4d:5e"},
		{"cpp scope", "std::string copy in hot path", "std::string copy in hot path"},
		{"long path", "/api/v1/orders/checkout/payments/refunds/Retry2", "/api/v1/orders/checkout/payments/refunds/Retry2"},
		{"epoch millis", "ts=1718012345678 in the log", "ts=1718012345678 in the log"},
		{"chinese prose", "支付服务报错率上升到5%，已回滚到v1.2.3", "支付服务报错率上升到5%，已回滚到v1.2.3"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Redact(tt.in)
			if got != tt.want {
				t.Fatalf("Redact(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if again := Redact(got); again != got {
				t.Fatalf("Redact is not idempotent: %q -> %q", got, again)
			}
		})
	}
}

func TestRedactRemovesEverySecretOfAMessage(t *testing.T) {
	secrets := []string{
		"AKIAIOSFODNN7EXAMPLE", "13812345678", "oncall@example.com", "hunter22",
		"ghp_1234567890abcdefghijklmnopqrstuvwxyzAB", "10.0.0.7",
	}
	msg := "rotated AKIAIOSFODNN7EXAMPLE; call 13812345678 or mail oncall@example.com; " +
		"mysql://root:hunter22@10.0.0.7/db; token ghp_1234567890abcdefghijklmnopqrstuvwxyzAB"
	got := Redact(msg)
	for _, s := range secrets {
		if strings.Contains(got, s) {
			t.Errorf("redacted text still contains %q: %q", s, got)
		}
	}
	if !strings.Contains(got, "rotated") || !strings.Contains(got, "mysql://") {
		t.Errorf("redaction removed ordinary words: %q", got)
	}
}
