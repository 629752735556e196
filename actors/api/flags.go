package api

import (
	"net/url"
)

// flagSpelling reads one boolean spelling of the contract (§10's extend):
// true or 1, false or 0. Case matters: "TRUE" is refused, as extend
// refuses it.
func flagSpelling(v string) (on, ok bool) {
	switch v {
	case "true", "1":
		return true, true
	case "false", "0":
		return false, true
	}
	return false, false
}

// queryFlag reads the boolean query parameter name: absent is false, and
// only the spellings of flagSpelling are taken. An empty value, any other
// spelling or the parameter given twice is refused rather than read as
// false: a bare or misspelt ?dry_run must not decommission for real.
func queryFlag(q url.Values, name string) (bool, *badRequest) {
	vs, ok := q[name]
	if !ok {
		return false, nil
	}
	if len(vs) > 1 {
		return false, invalidRequest("invalid argument: " + name + " given more than once")
	}
	on, ok := flagSpelling(vs[0])
	if !ok {
		return false, invalidRequest("invalid argument: " + name + " must be true, 1, false or 0")
	}
	return on, nil
}
