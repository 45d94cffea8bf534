package testenv

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/larkline/larkline/internal/testenv/provision"
)

// Secured is the binary's secured broker (see provision.SecuredKafka): SASL_SSL with
// SCRAM-SHA-512 on SASLBrokers, mutual TLS on MTLSBrokers, the standard authorizer
// with no access unless an ACL grants it. It is always the real broker from the
// Maven jars (the jvm kind): it is never provided by the environment, never a
// container and never kfake, and a broker that cannot start fails the test.
type Secured struct {
	*provision.SecuredKafka
	admin *kadm.Client
	cl    *kgo.Client
}

// securedService is the binary's secured broker, started on first use.
var securedService = &lazy[*Secured]{start: startSecured, stop: func(ctx context.Context, s *Secured) error {
	s.cl.Close()
	return s.Close(ctx)
}}

func startSecured(ctx context.Context, o provision.Options) (*Secured, error) {
	sk, err := provision.StartSecuredKafka(ctx, o)
	if err != nil {
		return nil, err
	}
	cl, err := sk.AdminClient()
	if err != nil {
		_ = sk.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return &Secured{SecuredKafka: sk, admin: kadm.NewClient(cl), cl: cl}, nil
}

// SecuredKafka returns the binary's secured broker, starting it on first use; it is
// stopped by Main. It fails t if the broker cannot start.
func SecuredKafka(t testing.TB) *Secured {
	t.Helper()
	s, err := securedService.get()
	if err != nil {
		t.Fatalf("testenv: secured kafka (jvm, SASL_SSL + mTLS + ACLs): %v", err)
	}
	return s
}

// Admin is the super user's (User:admin) admin client.
func (s *Secured) Admin() *kadm.Client { return s.admin }

// NewSCRAMUser creates a SCRAM-SHA-512 user with a random name starting with prefix
// and a random password, and returns both. The user has no ACLs.
func (s *Secured) NewSCRAMUser(t testing.TB, prefix string) (user, password string) {
	t.Helper()
	user, password = prefix+"-"+secretHex(4), secretHex(16)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	res, err := s.admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{
		User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: password,
	}})
	if err == nil {
		for _, r := range res {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		t.Fatalf("testenv: creating SCRAM user %s: %v", user, err)
	}
	return user, password
}

// NewCertUser writes a client certificate for the principal User:<prefix>-<random>
// (its CN) and returns the principal's name and the PEM certificate and key files.
func (s *Secured) NewCertUser(t testing.TB, prefix string) (user, certFile, keyFile string) {
	t.Helper()
	user = prefix + "-" + secretHex(4)
	certFile, keyFile, err := s.NewClientCert(user)
	if err != nil {
		t.Fatalf("testenv: client certificate for %s: %v", user, err)
	}
	return user, certFile, keyFile
}

// ACL is one allow rule, as kafka-acls.sh states it.
type ACL struct {
	// Principal is "User:<name>".
	Principal string
	// Operation is a kafka-acls.sh --operation: Read, Write, Create, Describe,
	// DescribeConfigs, AlterConfigs, Delete, Alter, IdempotentWrite, All.
	Operation string
	// Resource is "topic", "group", "cluster" or "transactional-id".
	Resource string
	// Name is the resource name, or its prefix when Prefixed.
	Name     string
	Prefixed bool
}

func (a ACL) String() string {
	pattern := "literal"
	if a.Prefixed {
		pattern = "prefixed"
	}
	return fmt.Sprintf("allow %s %s on %s %s (%s)", a.Principal, a.Operation, a.Resource, a.Name, pattern)
}

func (a ACL) builder() (*kadm.ACLBuilder, error) {
	op, err := kmsg.ParseACLOperation(a.Operation)
	if err != nil || op == kmsg.ACLOperationUnknown || op == kmsg.ACLOperationAny {
		return nil, fmt.Errorf("acl operation %q: %v", a.Operation, err)
	}
	b := kadm.NewACLs().Allow(a.Principal).AllowHosts().Operations(op)
	switch strings.ToLower(a.Resource) {
	case "topic":
		b = b.Topics(a.Name)
	case "group":
		b = b.Groups(a.Name)
	case "cluster":
		b = b.Clusters()
	case "transactional-id":
		b = b.TransactionalIDs(a.Name)
	default:
		return nil, fmt.Errorf("acl resource %q: want topic, group, cluster or transactional-id", a.Resource)
	}
	if a.Prefixed {
		b = b.ResourcePatternType(kadm.ACLPatternPrefixed)
	} else {
		b = b.ResourcePatternType(kadm.ACLPatternLiteral)
	}
	return b, nil
}

// Grant creates the ACLs, failing t on any error.
func (s *Secured) Grant(t testing.TB, acls ...ACL) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for _, a := range acls {
		b, err := a.builder()
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		res, err := s.admin.CreateACLs(ctx, b)
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err != nil {
			t.Fatalf("testenv: granting %s: %v", a, err)
		}
	}
}

func secretHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// UnsecuredJWT returns an unsigned JWT ("alg":"none") whose sub claim is subject,
// valid for ttl: what the OAUTHBEARER listener's unsecured validator accepts, the
// principal being User:<subject>. It is a test token; it proves nothing.
func UnsecuredJWT(subject string, ttl time.Duration) string {
	enc := base64.RawURLEncoding.EncodeToString
	now := time.Now()
	claims := fmt.Sprintf(`{"sub":%q,"iat":%d,"exp":%d}`, subject, now.Unix(), now.Add(ttl).Unix())
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(claims)) + "."
}
