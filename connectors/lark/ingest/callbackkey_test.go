package ingest

import (
	"bytes"
	"crypto/aes"
	"encoding/base64"
	"math/rand/v2"
	"testing"

	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"

	"github.com/larkline/larkline/connectors/lark/larktest"
)

// sdkDecrypt is larkevent.EventDecrypt with its panic (a wrong key can put the last
// '}' before the first '{') turned into an error.
func sdkDecrypt(encrypted, key string) (plain []byte, err error) {
	defer func() {
		if recover() != nil {
			plain, err = nil, errUndecryptable
		}
	}()
	return larkevent.EventDecrypt(encrypted, key)
}

// TestCallbackKeyMatchesSDK: the webhook's own signature and decryption compute
// what the SDK's larkevent.Signature and larkevent.EventDecrypt compute, for real
// callbacks, wrong keys, random ciphertexts and malformed fields.
func TestCallbackKeyMatchesSDK(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	randBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	for i := range 300 {
		key := base64.StdEncoding.EncodeToString(randBytes(1 + rng.IntN(40)))
		k, err := newCallbackKey(key)
		if err != nil {
			t.Fatal(err)
		}
		body := randBytes(rng.IntN(3000))
		ts, nonce := "17000000"+string(rune('0'+i%10)), base64.StdEncoding.EncodeToString(randBytes(8))
		sig := larkevent.Signature(ts, nonce, key, string(body))
		if !k.verify(ts, nonce, body, sig) {
			t.Fatalf("case %d: the SDK's signature does not verify", i)
		}
		if k.verify(ts, nonce, append(body, 'x'), sig) || k.verify(ts, nonce, body, sig[:len(sig)-1]) || k.verify(nonce, ts, body, sig) {
			t.Fatalf("case %d: a changed body, signature or header verifies", i)
		}

		plain := append([]byte(`{"schema":"2.0","n":`), randBytes(rng.IntN(500))...)
		plain = append(plain, '}')
		sealed, err := larktest.Encrypt(key, plain)
		if err != nil {
			t.Fatal(err)
		}
		other := base64.StdEncoding.EncodeToString(randBytes(aes.BlockSize * (1 + rng.IntN(20))))
		for _, c := range []struct {
			name, field, key string
		}{
			{"own key", sealed, key},
			{"wrong key", sealed, key + "x"},
			{"random ciphertext", other, key},
			{"short", base64.StdEncoding.EncodeToString(randBytes(rng.IntN(aes.BlockSize))), key},
			{"not whole blocks", base64.StdEncoding.EncodeToString(randBytes(aes.BlockSize + 1 + rng.IntN(aes.BlockSize-1))), key},
			{"not base64", "!" + sealed, key},
		} {
			ck, err := newCallbackKey(c.key)
			if err != nil {
				t.Fatal(err)
			}
			want, wantErr := sdkDecrypt(c.field, c.key)
			got, gotErr := ck.decrypt([]byte(c.field))
			if (wantErr != nil) != (gotErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("case %d %s: decrypt = %.64q, %v; the SDK's %.64q, %v", i, c.name, got, gotErr, want, wantErr)
			}
			if c.name == "own key" && !bytes.Equal(got, plain) {
				t.Fatalf("case %d: decrypt of a callback = %q, want %q", i, got, plain)
			}
		}
	}
}

// TestEncryptedField: the "encrypt" field's text, with or without escapes, and
// nothing for a field that is absent, null or not a string.
func TestEncryptedField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		raw, want string
	}{
		{`"abc+/="`, "abc+/="},
		{`"ab\/c\u003d"`, "ab/c="},
		{`""`, ""},
		{``, ""},
		{`null`, ""},
		{`12`, ""},
		{`{"a":1}`, ""},
	} {
		if got := encryptedField([]byte(c.raw)); string(got) != c.want {
			t.Errorf("encryptedField(%s) = %q, want %q", c.raw, got, c.want)
		}
	}
}
