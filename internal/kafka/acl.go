package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"msgx/internal/retry"
)

// DeniedError is Kafka refusing a request for lack of an ACL: which
// operation on which resource msgx's principal lacks. It is not an outage
// (retry.IsOutage is false): at start-up it refuses the start; a running
// component stops and is restarted with backoff, so that it resumes by
// itself once the ACL is granted (docs/operations.md#kafka-acls lists the ACLs).
type DeniedError struct {
	// Operation is the ACL operation (Read, Write, Create, DescribeConfigs,
	// Describe, IdempotentWrite).
	Operation string
	// Resource is the ACL resource type (Topic, Group, TransactionalId,
	// Cluster); Name its name ("" for the cluster).
	Resource, Name string
	// For says who needs it ("the router reads it"); may be empty.
	For string
	// Err is Kafka's answer; nil when msgx asked what it may do
	// (CheckAccess) instead of being refused.
	Err error

	also []string // more resources of the kind that lack the operation
}

func (e *DeniedError) Error() string {
	what := fmt.Sprintf("%s %q", e.Resource, e.Name)
	if e.Resource == "Cluster" {
		what = "the Cluster"
	}
	if e.For != "" {
		what += " (" + e.For + ")"
	}
	if len(e.also) > 0 {
		what += fmt.Sprintf(" and %d more: %s", len(e.also), strings.Join(e.also, ", "))
	}
	msg := fmt.Sprintf("Kafka denies msgx's user %s on %s: an ACL is missing (docs/operations.md#kafka-acls lists the ACLs msgx needs)", e.Operation, what)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *DeniedError) Unwrap() error { return e.Err }

// Denied returns err as a DeniedError of operation on resource name when
// Kafka refused it for lack of an ACL, else err itself. The error code
// alone says which kind of resource was refused; the caller knows the
// operation and the name. CLUSTER_AUTHORIZATION_FAILED is always the
// cluster's: for a producer's InitProducerId that is IdempotentWrite,
// which Kafka 3.0 and newer grants with Write on any topic (KIP-679).
func Denied(err error, operation, resource, name string) error {
	if err == nil {
		return nil
	}
	var d *DeniedError
	if errors.As(err, &d) {
		return err
	}
	switch authorization(err) {
	case "":
		return err
	case "Cluster":
		if operation == "Write" || operation == "IdempotentWrite" {
			operation = "IdempotentWrite (or Write on msgx's topics, which implies it since Kafka 3.0)"
		}
		return &DeniedError{Operation: operation, Resource: "Cluster", Err: err}
	case "Topic":
		if resource != "Topic" {
			resource, name = "Topic", "one of "+name+"'s topics"
		}
	case "Group":
		if resource != "Group" {
			operation, resource = "Read", "Group"
		}
	case "TransactionalId":
		if resource != "TransactionalId" {
			operation, resource = "Write", "TransactionalId"
		}
	}
	return &DeniedError{Operation: operation, Resource: resource, Name: name, Err: err}
}

// IsDenied reports whether err is, or carries, a refusal for lack of an
// ACL.
func IsDenied(err error) bool { return authorization(err) != "" }

// authorization names the resource type of an authorization error in err
// (sarama's or franz-go's), "" when there is none.
func authorization(err error) string {
	var d *DeniedError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &d):
		return d.Resource
	case errors.Is(err, sarama.ErrTopicAuthorizationFailed), errors.Is(err, kerr.TopicAuthorizationFailed):
		return "Topic"
	case errors.Is(err, sarama.ErrGroupAuthorizationFailed), errors.Is(err, kerr.GroupAuthorizationFailed):
		return "Group"
	case errors.Is(err, sarama.ErrTransactionalIDAuthorizationFailed), errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return "TransactionalId"
	case errors.Is(err, sarama.ErrClusterAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
		return "Cluster"
	}
	var pe sarama.ProducerErrors
	if errors.As(err, &pe) {
		for _, e := range pe {
			if r := authorization(e.Err); r != "" {
				return r
			}
		}
	}
	// goka formats sarama's errors with %v ("Failed to start Sarama
	// producer: …"), which ends the chain: their text is all that is left.
	msg := err.Error()
	for _, k := range []struct {
		err      sarama.KError
		resource string
	}{{sarama.ErrTopicAuthorizationFailed, "Topic"}, {sarama.ErrGroupAuthorizationFailed, "Group"},
		{sarama.ErrTransactionalIDAuthorizationFailed, "TransactionalId"}, {sarama.ErrClusterAuthorizationFailed, "Cluster"}} {
		if strings.Contains(msg, k.err.Error()) {
			return k.resource
		}
	}
	return ""
}

// Access is what one msgx component needs of one Kafka resource.
type Access struct {
	// Resource is "Topic" or "Group"; Name its name.
	Resource, Name string
	// Ops are the ACL operations needed (Read, Write, DescribeConfigs, …).
	Ops []ACLOp
	// For says who needs them, for the refusal ("the router reads it").
	For string
}

// ACLOp is an ACL operation as kafka-acls.sh names it.
type ACLOp = kadm.ACLOperation

// The operations msgx needs.
const (
	OpRead            = kadm.OpRead
	OpWrite           = kadm.OpWrite
	OpDescribeConfigs = kadm.OpDescribeConfigs
)

// CheckAccess asks the cluster which operations msgx's principal may
// perform on each resource (KIP-430's authorized operations: Metadata for
// topics, DescribeGroups for groups) and returns one DeniedError per
// missing operation, joined; nil when everything is allowed. A cluster
// that does not report them (no authorizer, the embedded Kafka) is not
// judged here: a refusal then shows where it happens. The topics must
// exist (EnsureTopics first). An unreachable cluster is an outage.
func CheckAccess(ctx context.Context, c Config, brokers []string, needs []Access) error {
	cl, err := NewKgoClient(c, brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	var topics, groups []string
	for _, n := range needs {
		if n.Resource == "Topic" {
			topics = append(topics, n.Name)
		} else {
			groups = append(groups, n.Name)
		}
	}
	allowed := map[string][]ACLOp{}
	known := map[string]bool{}
	if len(topics) > 0 {
		md, err := adm.Metadata(kadm.WithAuthorizedOps(ctx), topics...)
		if err != nil {
			return retry.Outage("kafka", fmt.Errorf("asking Kafka what msgx may do on its topics: %w", err))
		}
		for _, t := range md.Topics {
			key := "Topic/" + t.Topic
			switch {
			case errors.Is(t.Err, kerr.TopicAuthorizationFailed):
				known[key] = true // not even Describe
			case t.Err != nil:
			case len(t.AuthorizedOperations) > 0:
				known[key], allowed[key] = true, t.AuthorizedOperations
			}
		}
	}
	if len(groups) > 0 {
		described, err := adm.DescribeGroups(ctx, groups...)
		var se *kadm.ShardErrors
		switch {
		case err == nil:
		case errors.As(err, &se):
			// Without Describe on a group (Read implies it) the broker
			// refuses even to say which coordinator holds it: the shard's
			// groups come back as an error, not as described groups.
			for _, e := range se.Errs {
				if errors.Is(e.Err, kerr.GroupAuthorizationFailed) {
					for _, g := range groups {
						if _, ok := described[g]; !ok {
							known["Group/"+g] = true
						}
					}
				}
			}
		case errors.Is(err, kerr.GroupAuthorizationFailed):
			for _, g := range groups {
				known["Group/"+g] = true
			}
		default:
			return retry.Outage("kafka", fmt.Errorf("asking Kafka what msgx may do in its groups: %w", err))
		}
		for _, g := range described {
			key := "Group/" + g.Group
			switch {
			case errors.Is(g.Err, kerr.GroupAuthorizationFailed):
				known[key] = true
			case g.Err != nil:
			case len(g.AuthorizedOperations) > 0:
				known[key], allowed[key] = true, g.AuthorizedOperations
			}
		}
	}
	// One line per missing (operation, resource type), naming every
	// resource that lacks it: one prefixed ACL usually grants them all.
	var errs []error
	missing := map[string]*DeniedError{}
	for _, n := range needs {
		key := n.Resource + "/" + n.Name
		if !known[key] {
			continue
		}
		for _, op := range n.Ops {
			if slices.Contains(allowed[key], op) || slices.Contains(allowed[key], kadm.OpAll) {
				continue
			}
			k := opName(op) + " " + n.Resource
			if d := missing[k]; d != nil {
				if !slices.Contains(d.also, n.Name) && d.Name != n.Name {
					d.also = append(d.also, n.Name)
				}
				continue
			}
			d := &DeniedError{Operation: opName(op), Resource: n.Resource, Name: n.Name, For: n.For}
			missing[k] = d
			errs = append(errs, d)
		}
	}
	return errors.Join(errs...)
}

// opName is op as kafka-acls.sh's --operation spells it.
func opName(op ACLOp) string {
	switch op {
	case kadm.OpRead:
		return "Read"
	case kadm.OpWrite:
		return "Write"
	case kadm.OpDescribeConfigs:
		return "DescribeConfigs"
	case kadm.OpDescribe:
		return "Describe"
	case kadm.OpCreate:
		return "Create"
	}
	return op.String()
}
