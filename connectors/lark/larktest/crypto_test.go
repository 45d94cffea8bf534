package larktest_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"

	"github.com/larkline/larkline/connectors/lark/larktest"
)

func sample(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "shared", "spec", "reference", "lark-samples", name))
	if err != nil {
		t.Fatalf("the shared samples must be present (../shared from the project root): %v", err)
	}
	return b
}

func TestDecryptKnownAnswers(t *testing.T) {
	var sdkBody, nodeBody struct {
		Encrypt string `json:"encrypt"`
	}
	must(t, json.Unmarshal(sample(t, "callback_encrypted_body_sdk_test_key_1212121212.json"), &sdkBody))
	must(t, json.Unmarshal(sample(t, "callback_url_verification_encrypted_nodesdk_key_mazhe.nerd.json"), &nodeBody))
	tests := []struct {
		name, key, cipher, want string
	}{
		{"Lark doc vector", "test key", "P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk=", "hello world"},
		{"SDK test callback", "1212121212", sdkBody.Encrypt, strings.TrimSpace(string(sample(t, "callback_encrypted_body_sdk_test_key_1212121212.plain.json")))},
		{"node-sdk challenge", "mazhe.nerd", nodeBody.Encrypt, `{"challenge":"5634b122-c042-4634-bc7f-b07a3c3e77ad","token":"iRdCP2WwXNBXRM3mGLqhrgch3cn0gbT6","type":"url_verification"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := larktest.Decrypt(tt.key, tt.cipher)
			must(t, err)
			if string(got) != tt.want {
				t.Fatalf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestEncryptIsWhatTheSDKDecrypts(t *testing.T) {
	plain := []byte(`{"schema":"2.0","header":{"event_id":"x"},"event":{"message":{"content":"{\"text\":\"你好 <b>&\"}"}}}`)
	a, err := larktest.Encrypt("k", plain)
	must(t, err)
	b, err := larktest.Encrypt("k", plain)
	must(t, err)
	if a == b {
		t.Fatal("two encryptions are equal; the IV must be random")
	}
	raw, err := base64.StdEncoding.DecodeString(a)
	must(t, err)
	if len(raw)%16 != 0 || len(raw) < 16+len(plain) {
		t.Fatalf("ciphertext of %d bytes is not IV + padded blocks", len(raw))
	}
	sdk, err := larkevent.EventDecrypt(a, "k")
	must(t, err)
	if !bytes.Equal(sdk, plain) {
		t.Fatalf("SDK decrypted %q", sdk)
	}
	ours, err := larktest.Decrypt("k", a)
	must(t, err)
	if !bytes.Equal(ours, plain) {
		t.Fatalf("Decrypt gave %q", ours)
	}
	// Exact multiple of the block size still gets a full padding block.
	block := bytes.Repeat([]byte("a"), 32)
	c, err := larktest.Encrypt("k", block)
	must(t, err)
	if raw, _ := base64.StdEncoding.DecodeString(c); len(raw) != 16+48 {
		t.Fatalf("32 plaintext bytes gave %d ciphertext bytes, want IV + 48", len(raw))
	}
}

func TestDecryptRejects(t *testing.T) {
	good, err := larktest.Encrypt("right", []byte(`{"a":1}`))
	must(t, err)
	tests := []struct{ name, key, cipher string }{
		{"wrong key", "wrong", good},
		{"not base64", "right", "***"},
		{"too short", "right", base64.StdEncoding.EncodeToString(make([]byte, 16))},
		{"not whole blocks", "right", base64.StdEncoding.EncodeToString(make([]byte, 40))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := larktest.Decrypt(tt.key, tt.cipher); !errors.Is(err, larktest.ErrDecrypt) {
				t.Fatalf("err = %v, want ErrDecrypt", err)
			}
		})
	}
}

func TestSignatureMatchesSDK(t *testing.T) {
	body := []byte(`{"encrypt":"abc"}`)
	if got, want := larktest.Signature("1700000000", "n0nce", "key", body), larkevent.Signature("1700000000", "n0nce", "key", string(body)); got != want {
		t.Fatalf("signature %s, SDK %s", got, want)
	}
}
