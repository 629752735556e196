package transport

import "fmt"

// Subjects:
//
//	narad.<cluster>.node.<id>.<service>   one node's service (plain subscription)
//	narad.<cluster>.admin.<verb>          an admin command (queue group "admin": one node answers)
//
// Every token is checked by ValidToken, so a node id can never inject a
// wildcard or an extra level into another node's subject.
const (
	subjectRoot = "narad"
	adminQueue  = "admin"
	// maxTokenLen bounds a token; ids and service names are short words.
	maxTokenLen = 64
)

// ValidToken checks one subject token (cluster name, node id, service, admin
// verb): 1 to 64 characters of [A-Za-z0-9_-]. That is stricter than NATS
// (which only bans whitespace, '.', '*' and '>') so that a token is also a
// safe metric label value and file name.
func ValidToken(kind, tok string) error {
	if tok == "" {
		return fmt.Errorf("%s is empty: %w", kind, ErrInvalid)
	}
	if len(tok) > maxTokenLen {
		return fmt.Errorf("%s %q is longer than %d: %w", kind, tok, maxTokenLen, ErrInvalid)
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%s %q has %q at %d, want only [A-Za-z0-9_-]: %w", kind, tok, c, i, ErrInvalid)
		}
	}
	return nil
}

// NodeSubject is the subject of a node's service:
// narad.<cluster>.node.<node>.<service>.
func NodeSubject(cluster, node, service string) (string, error) {
	if err := validTokens("cluster", cluster, "node", node, "service", service); err != nil {
		return "", err
	}
	return subjectRoot + "." + cluster + ".node." + node + "." + service, nil
}

// AdminSubject is the subject of an admin verb: narad.<cluster>.admin.<verb>.
func AdminSubject(cluster, verb string) (string, error) {
	if err := validTokens("cluster", cluster, "admin verb", verb); err != nil {
		return "", err
	}
	return subjectRoot + "." + cluster + ".admin." + verb, nil
}

// validTokens checks kind/token pairs.
func validTokens(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := ValidToken(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}
