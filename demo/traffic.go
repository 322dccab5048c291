package demo

import "math"

// The events' open columns (no public list of values; the catalog declares
// them type: text and analysts group by them through partition selection):
//
//   - referrer: the domain a view came from, NULL for direct visits. Each
//     shopper has a usual referrer (the site that brought them) and views
//     from it or, now and then, from elsewhere. Domains are heavy-tailed:
//     a few search engines and social sites bring most visits, then a long
//     tail of blogs and deal sites that bring one or two shoppers each.
//   - search_term: what a search page view searched for (NULL on other
//     pages): a few popular products, then a long tail of two- and
//     three-word queries.
//
// They are drawn from their own stream after the other columns, so the
// other columns are the same with or without them.

// referrerHead are the domains that bring most visits, most first.
var referrerHead = []string{
	"google.com", "facebook.com", "instagram.com", "bing.com", "t.co", "youtube.com", "pinterest.com",
	"duckduckgo.com", "reddit.com", "tiktok.com", "yahoo.com", "linkedin.com", "ecosia.org",
	"news.ycombinator.com", "slickdeals.net", "wikipedia.org", "baidu.com", "yandex.ru", "naver.com", "mail.google.com",
}

// The long tail of referrers: <word><word>.<tld> (<word>hub.<tld>).
var (
	referrerWords = []string{"deal", "shop", "style", "tech", "gadget", "home", "green", "daily", "smart", "budget",
		"urban", "family", "gear", "trend", "review", "coupon", "outdoor", "kitchen", "travel", "fit"}
	referrerTLDs = []string{".com", ".net", ".blog", ".io", ".co.uk", ".de"}
)

// searchHead are the most searched terms, most first.
var searchHead = []string{
	"running shoes", "headphones", "phone case", "usb c cable", "gift card", "backpack", "laptop",
	"coffee maker", "dress", "sunglasses", "water bottle", "yoga mat", "charger", "jeans", "watch",
}

// The long tail of searches: [<adjective>] <adjective> <noun>.
var (
	searchAdjectives = []string{"wireless", "red", "black", "kids", "waterproof", "cheap", "leather", "organic",
		"vintage", "gaming", "bluetooth", "mens", "womens", "large", "mini", "portable", "cotton", "steel"}
	searchNouns = []string{"shoes", "jacket", "speaker", "mouse", "keyboard", "lamp", "chair", "bag", "mug",
		"tent", "blender", "camera", "scarf", "bottle", "sneakers", "pillow", "desk", "watch band", "earbuds", "kettle"}
)

// zipf is a cumulative weight table of a Zipf law with exponent s over n
// ranks (weights rounded to integers; the largest is 10¹²).
func zipf(n int, s float64) cumulative {
	w := make([]int64, n)
	for k := range w {
		w[k] = max(1, int64(1e12/math.Pow(float64(k+1), s)))
	}
	return newCumulative(w)
}

var (
	referrerRanks = zipf(len(referrerHead)+len(referrerWords)*len(referrerWords)*len(referrerTLDs), 1.3)
	searchRanks   = zipf(len(searchHead)+len(searchAdjectives)*len(searchNouns)*(1+len(searchAdjectives)), 1.1)
)

// referrerName is the domain of rank k.
func referrerName(k int) string {
	if k < len(referrerHead) {
		return referrerHead[k]
	}
	k -= len(referrerHead)
	nw, nt := len(referrerWords), len(referrerTLDs)
	a, b, t := k%nw, (k/nw)%nw, k/(nw*nw)%nt
	name := referrerWords[a] + referrerWords[b]
	if a == b {
		name = referrerWords[a] + "hub"
	}
	return name + referrerTLDs[t]
}

// searchName is the search term of rank k.
func searchName(k int) string {
	if k < len(searchHead) {
		return searchHead[k]
	}
	k -= len(searchHead)
	na, nn := len(searchAdjectives), len(searchNouns)
	a, n, b := k%na, (k/na)%nn, k/(na*nn)
	term := searchAdjectives[a] + " " + searchNouns[n]
	if b > 0 && b-1 != a {
		term = searchAdjectives[b-1] + " " + term
	}
	return term
}

// traffic is one event's open columns ("" for NULL).
type traffic struct{ referrer, search string }

// drawTraffic draws the open columns of evs (in their order) from r.
func drawTraffic(r *rng, evs []event) []traffic {
	usual := map[int64]string{} // each shopper's usual referrer ("" direct)
	out := make([]traffic, len(evs))
	for i, e := range evs {
		ref, ok := usual[e.user]
		if !ok {
			if r.below(10) >= 4 { // 40% of shoppers come directly
				ref = referrerName(referrerRanks.draw(r))
			}
			usual[e.user] = ref
		}
		switch x := r.below(10); {
		case x < 2: // a fifth of views come from elsewhere
			ref = referrerName(referrerRanks.draw(r))
		case x < 3: // a tenth directly
			ref = ""
		}
		out[i].referrer = ref
		if Pages[e.page] == "search" {
			out[i].search = searchName(searchRanks.draw(r))
		}
	}
	return out
}
