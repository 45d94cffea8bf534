package kafka

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrAccessDenied is returned (wrapped) by CheckAccess when the client's principal
// lacks a permission larkline needs. The message names every missing permission as
// operation and resource, and what needs it.
var ErrAccessDenied = errors.New("kafka: the principal lacks permissions larkline needs")

// Operation and ResourceType are Kafka's ACL operation and resource type.
type (
	Operation    = kmsg.ACLOperation
	ResourceType = kmsg.ACLResourceType
)

// Operations larkline checks (kafka-acls.sh --operation names in comments).
const (
	OpRead            = kmsg.ACLOperationRead            // Read
	OpWrite           = kmsg.ACLOperationWrite           // Write
	OpCreate          = kmsg.ACLOperationCreate          // Create
	OpDescribe        = kmsg.ACLOperationDescribe        // Describe
	OpDescribeConfigs = kmsg.ACLOperationDescribeConfigs // DescribeConfigs
	OpAlterConfigs    = kmsg.ACLOperationAlterConfigs    // AlterConfigs
)

// Resource types larkline checks.
const (
	ResourceTopic = kmsg.ACLResourceTypeTopic
	ResourceGroup = kmsg.ACLResourceTypeGroup
)

// Access is one permission a role or command needs: an operation on a topic or a
// consumer group, and why.
type Access struct {
	Operation kmsg.ACLOperation
	Resource  kmsg.ACLResourceType
	Name      string
	// Why says what needs it ("role sink: consumes the evidence topic").
	Why string
}

func (a Access) String() string {
	return fmt.Sprintf("%s on %s %q (%s)", opName(a.Operation), resName(a.Resource), a.Name, a.Why)
}

// opName is the operation as kafka-acls.sh spells it.
func opName(op kmsg.ACLOperation) string {
	switch op {
	case OpDescribeConfigs:
		return "DescribeConfigs"
	case OpAlterConfigs:
		return "AlterConfigs"
	}
	s := strings.ToLower(op.String())
	if s == "" {
		return op.String()
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func resName(r kmsg.ACLResourceType) string {
	return strings.ToLower(r.String())
}

// authorizedOpsUnknown is what the broker answers for authorized operations it was
// not asked for or cannot say (Kafka's -2147483648).
const authorizedOpsUnknown = math.MinInt32

// CheckAccess asks the brokers, as cl's principal, whether each of needs is allowed,
// and returns an error wrapping ErrAccessDenied that names every one that is not. It
// is meant for start-up: a role refused by an ACL would otherwise retry (franz-go
// group joins, sarama metadata) and look like a hang.
//
// It asks with the Metadata request's topic authorized operations and the
// DescribeGroups request's authorized operations (KIP-430), which the standard
// authorizer answers with what the principal may do, implied operations included
// (Read implies Describe). A Create on a topic that does not exist yet is checked
// with a validate-only CreateTopics. Where the broker cannot say (a topic that does
// not exist, on a broker that does not report them, for operations other than
// Create; a broker without an authorizer reports everything allowed; kfake reports
// nothing), the need is not checked here: the operation itself then fails with the
// broker's authorization error.
//
// Errors other than refusals (broker unreachable, timeouts) are returned as they are.
func CheckAccess(ctx context.Context, cl *kgo.Client, needs []Access) error {
	var missing []Access
	topics, groups := map[string][]Access{}, map[string][]Access{}
	for _, n := range needs {
		switch n.Resource {
		case ResourceTopic:
			topics[n.Name] = append(topics[n.Name], n)
		case ResourceGroup:
			groups[n.Name] = append(groups[n.Name], n)
		default:
			return fmt.Errorf("%w: access check of resource type %s", ErrInvalidOptions, n.Resource)
		}
	}
	m, err := checkTopics(ctx, cl, topics)
	if err != nil {
		return err
	}
	missing = append(missing, m...)
	m, err = checkGroups(ctx, cl, groups)
	if err != nil {
		return err
	}
	missing = append(missing, m...)
	if len(missing) == 0 {
		return nil
	}
	sort.SliceStable(missing, func(i, j int) bool { return missing[i].String() < missing[j].String() })
	lines := make([]string, 0, len(missing))
	for _, a := range missing {
		lines = append(lines, "missing "+a.String())
	}
	return fmt.Errorf("%w (see the secured cluster section of docs/operations.md):\n  %s", ErrAccessDenied, strings.Join(slices.Compact(lines), "\n  "))
}

func allowed(ops int32, op kmsg.ACLOperation) bool {
	return ops != authorizedOpsUnknown && ops&(1<<uint(op)) != 0
}

// checkTopics asks the broker, in one Metadata request, what the principal may do
// on each topic, and returns the needs it may not.
func checkTopics(ctx context.Context, cl *kgo.Client, topics map[string][]Access) ([]Access, error) {
	if len(topics) == 0 {
		return nil, nil
	}
	req := kmsg.NewPtrMetadataRequest()
	req.IncludeTopicAuthorizedOperations = true
	names := make([]string, 0, len(topics))
	for name := range topics {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("kafka access check: metadata: %w", err)
	}
	var missing []Access
	var toCreate []Access
	seen := map[string]bool{}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		name := *t.Topic
		seen[name] = true
		err := kerr.ErrorForCode(t.ErrorCode)
		switch {
		case errors.Is(err, kerr.TopicAuthorizationFailed):
			// not even Describe: every need on it is missing (Create of a topic one
			// cannot describe is refused too).
			missing = append(missing, topics[name]...)
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			// Kafka reports what the principal may do on a topic that does not exist
			// yet (Create included); an older broker may not, and then only Create can
			// be checked, with a validate-only CreateTopics.
			for _, n := range topics[name] {
				switch {
				case t.AuthorizedOperations != authorizedOpsUnknown:
					if !allowed(t.AuthorizedOperations, n.Operation) {
						missing = append(missing, n)
					}
				case n.Operation == OpCreate:
					toCreate = append(toCreate, n)
				}
			}
		case err != nil:
			return nil, fmt.Errorf("kafka access check: metadata of topic %s: %w", name, err)
		default:
			for _, n := range topics[name] {
				// a broker (or kfake) that does not report them: nothing to check
				if t.AuthorizedOperations != authorizedOpsUnknown && !allowed(t.AuthorizedOperations, n.Operation) {
					missing = append(missing, n)
				}
			}
		}
	}
	for _, name := range names {
		if !seen[name] {
			return nil, fmt.Errorf("kafka access check: metadata answered nothing for topic %s", name)
		}
	}
	if len(toCreate) == 0 {
		return missing, nil
	}
	refused, err := checkCreate(ctx, cl, toCreate)
	if err != nil {
		return nil, err
	}
	return append(missing, refused...), nil
}

// checkCreate asks, with a validate-only CreateTopics, whether the principal may
// create the topics a broker that reports no authorized operations left
// unchecked, and returns the needs it refused.
func checkCreate(ctx context.Context, cl *kgo.Client, toCreate []Access) ([]Access, error) {
	creq := kmsg.NewPtrCreateTopicsRequest()
	creq.ValidateOnly = true
	creq.TimeoutMillis = 15_000
	for _, n := range toCreate {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic = n.Name
		t.NumPartitions, t.ReplicationFactor = -1, -1
		creq.Topics = append(creq.Topics, t)
	}
	cresp, err := creq.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("kafka access check: validate-only create: %w", err)
	}
	var missing []Access
	for _, t := range cresp.Topics {
		if errors.Is(kerr.ErrorForCode(t.ErrorCode), kerr.TopicAuthorizationFailed) {
			for _, n := range toCreate {
				if n.Name == t.Topic {
					missing = append(missing, n)
				}
			}
		}
	}
	return missing, nil
}

func checkGroups(ctx context.Context, cl *kgo.Client, groups map[string][]Access) ([]Access, error) {
	if len(groups) == 0 {
		return nil, nil
	}
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.IncludeAuthorizedOperations = true
	for name := range groups {
		req.Groups = append(req.Groups, name)
	}
	sort.Strings(req.Groups)
	for {
		missing, retry, err := describeGroups(ctx, cl, req, groups)
		if retry == nil {
			return missing, err
		}
		// a coordinator still loading (a fresh cluster creates __consumer_offsets)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kafka access check: describing groups: %w (%w)", retry, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// describeGroups asks once; retry is a retriable error (then ask again).
func describeGroups(ctx context.Context, cl *kgo.Client, req *kmsg.DescribeGroupsRequest, groups map[string][]Access) (missing []Access, retry, err error) {
	seen := map[string]bool{}
	for _, shard := range cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			// FindCoordinator refused: the principal may not even describe the group.
			var ke *kerr.Error
			if errors.As(shard.Err, &ke) && errors.Is(ke, kerr.GroupAuthorizationFailed) {
				for _, g := range shard.Req.(*kmsg.DescribeGroupsRequest).Groups {
					seen[g] = true
					missing = append(missing, groups[g]...)
				}
				continue
			}
			if kerr.IsRetriable(shard.Err) {
				return nil, shard.Err, nil
			}
			return nil, nil, fmt.Errorf("kafka access check: describing groups: %w", shard.Err)
		}
		for _, g := range shard.Resp.(*kmsg.DescribeGroupsResponse).Groups {
			seen[g.Group] = true
			err := kerr.ErrorForCode(g.ErrorCode)
			switch {
			case errors.Is(err, kerr.GroupAuthorizationFailed):
				missing = append(missing, groups[g.Group]...)
			case err != nil && kerr.IsRetriable(err):
				return nil, err, nil
			case err != nil:
				// not a refusal (a group the broker cannot describe now): not checkable
				// here; the group's own requests report whatever it is
			default:
				for _, n := range groups[g.Group] {
					if g.AuthorizedOperations != authorizedOpsUnknown && !allowed(g.AuthorizedOperations, n.Operation) {
						missing = append(missing, n)
					}
				}
			}
		}
	}
	for _, g := range req.Groups {
		if !seen[g] {
			return nil, nil, fmt.Errorf("kafka access check: no answer for group %s", g)
		}
	}
	return missing, nil, nil
}
