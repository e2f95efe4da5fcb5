package policy

import "slices"

// The rule index: a decision looks only at the rules that can bear on it,
// in file order, instead of walking every rule. A rule bears on a decision
// only if its match holds for the principal and one of its patterns can
// cover the name; skipping the others changes nothing (a rule whose match
// fails or whose patterns all miss is passed over by decide, and its
// condition is never evaluated).
//
//   - A rule with a match is filed under the values of one of its match
//     keys (the most selective it has: subjects, api_keys, client_ids,
//     groups, scopes, routes): a principal lacking all of them cannot
//     satisfy the match.
//   - A rule without one (it applies to everyone) is filed under the first
//     prefixLen bytes of each of its patterns' literal prefixes, or kept
//     with the rules always looked at when a pattern's literal prefix is
//     shorter than that.
//
// The candidates are then checked in full (rule.applies, pattern.Match).

// prefixLen is how many bytes of a pattern's literal prefix file a rule
// that applies to everyone.
const prefixLen = 4

type ruleIndex struct {
	bySubject, byAPIKey, byClient, byGroup, byScope, byRoute map[string][]int32
	byPrefix                                                 map[string][]int32
	always                                                   []int32
}

func buildIndex(rules []rule) ruleIndex {
	ix := ruleIndex{
		bySubject: map[string][]int32{}, byAPIKey: map[string][]int32{}, byClient: map[string][]int32{},
		byGroup: map[string][]int32{}, byScope: map[string][]int32{}, byRoute: map[string][]int32{},
		byPrefix: map[string][]int32{},
	}
	file := func(m map[string][]int32, s set, i int32) {
		for v := range s {
			m[v] = append(m[v], i)
		}
	}
	for n := range rules {
		r, i := &rules[n], int32(n)
		switch {
		case r.subjects != nil:
			file(ix.bySubject, r.subjects, i)
		case r.apiKeys != nil:
			file(ix.byAPIKey, r.apiKeys, i)
		case r.clientIDs != nil:
			file(ix.byClient, r.clientIDs, i)
		case r.groups != nil:
			file(ix.byGroup, r.groups, i)
		case r.scopes != nil:
			file(ix.byScope, r.scopes, i)
		case r.routes != nil:
			file(ix.byRoute, r.routes, i)
		default:
			keys := map[string]bool{}
			short := false
			for _, pat := range slices.Concat(r.allow, r.deny) {
				if lp := pat.LiteralPrefix(); len(lp) >= prefixLen {
					keys[lp[:prefixLen]] = true
				} else {
					short = true
				}
			}
			if short {
				ix.always = append(ix.always, i)
				continue
			}
			for k := range keys {
				ix.byPrefix[k] = append(ix.byPrefix[k], i)
			}
		}
	}
	return ix
}

// candidates appends to dst, in file order and once each, the rules that
// may bear on p's decision about name on route.
func (ix *ruleIndex) candidates(dst []int32, p Principal, route, name string) []int32 {
	dst = append(dst, ix.always...)
	dst = append(dst, ix.bySubject[p.Subject]...)
	dst = append(dst, ix.byAPIKey[p.APIKey]...)
	dst = append(dst, ix.byClient[p.ClientID]...)
	for _, g := range p.Groups {
		dst = append(dst, ix.byGroup[g]...)
	}
	for _, s := range p.Scopes {
		dst = append(dst, ix.byScope[s]...)
	}
	dst = append(dst, ix.byRoute[route]...)
	if len(name) >= prefixLen {
		dst = append(dst, ix.byPrefix[name[:prefixLen]]...)
	}
	slices.Sort(dst)
	return slices.Compact(dst)
}
