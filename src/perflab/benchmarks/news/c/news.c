/*
 * news: the C News workload (Collyer & Spencer, "News Need Not Be Slow", 1987).
 *
 * Files a batch of Usenet articles into a news spool (a newsgroup directory
 * tree, an active file, a history file, per-site batch files) and expires
 * old articles, in one of two styles:
 *
 *   bnews  the habits the paper measured in B news: the unbatcher copies each
 *          article to a temporary file and forks and execs the filer for it;
 *          the filer re-reads the sys and active files a line at a time,
 *          searches the history file linearly, names every file by its full
 *          path, stats before every create, copies the article a line per
 *          write(2), reopens the batch files and updates active in place for
 *          every article. Expire reads the human-readable dates in history
 *          and opens every article to look for an Expires header.
 *   cnews  the paper's fixes: one process; sys and active read once (stat,
 *          malloc, one read) and kept in core; chdir to the spool and relative
 *          names after; create without checking (O_CREAT|O_EXCL; the
 *          directory is made only when the create fails); the article written
 *          with one write; batch files and history kept open (buffered); an
 *          indexed history (a hash index file, history.idx, as C news's dbm).
 *          Expire uses the decimal dates and expiry field kept in history and
 *          never opens an article.
 *
 * Usage:
 *   news reset  -S SPOOL -I INITDIR             fresh spool (untimed set-up)
 *   news file   -s STYLE -S SPOOL -f FEED       file the batch
 *   news expire -s STYLE -S SPOOL -n NOW -c CUTOFF
 *   news rnews1 -S SPOOL < ARTICLE              (bnews: the per-article filer)
 *
 * Each of file and expire prints its counts as metric lines (the runtime's
 * protocol, core/c/perflab.h): news.PHASE.articles, .accepted, .duplicates,
 * .cancels, .links, .expired and .kept.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perflab.h"

#define MAXGROUPS 16
#define MAXSITES 16
#define HDRMAX 8192

static const char *style = "cnews";
static const char *spool = NULL;
static const char *self = NULL;

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		pl_die("out of memory (%zu bytes)", n);
	return p;
}

static char *slurp(const char *name, size_t *len)
{
	/* The paper's way: stat for the size, malloc, one read. */
	int fd = open(name, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		pl_die("%s: %s", name, strerror(errno));
	char *buf = xmalloc((size_t)st.st_size + 1);
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0)
			pl_die("read %s: %s", name, strerror(errno));
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	*len = got;
	return buf;
}

static void writeall(int fd, const char *buf, size_t len, const char *what)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			pl_die("write %s: %s", what, strerror(errno));
		}
		buf += n;
		len -= (size_t)n;
	}
}

static void spurt(const char *name, const char *buf, size_t len)
{
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof tmp, "%s.new", name);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		pl_die("%s: %s", tmp, strerror(errno));
	writeall(fd, buf, len, tmp);
	close(fd);
	if (rename(tmp, name) < 0)
		pl_die("rename %s: %s", tmp, strerror(errno));
}

/* ---------- headers ---------- */

struct article {
	const char *text;
	size_t len;
	char msgid[256];
	char groups[1024];
	char date[128];
	char expires[128];
	char control[512];
};

/* Copy header `name` (e.g. "Newsgroups:") of the header block into out; 1 if found. */
static int header(const char *text, size_t len, const char *name, size_t namelen, char *out, size_t outlen)
{
	const char *p = text, *end = text + len;
	while (p < end && *p != '\n') {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			eol = end;
		if ((size_t)(eol - p) > namelen && p[0] == name[0] && strncasecmp(p, name, namelen) == 0) {
			const char *v = p + namelen;
			while (v < eol && (*v == ' ' || *v == '\t'))
				v++;
			size_t n = (size_t)(eol - v);
			if (n >= outlen)
				n = outlen - 1;
			memcpy(out, v, n);
			out[n] = '\0';
			return 1;
		}
		p = eol + 1;
	}
	out[0] = '\0';
	return 0;
}

#define HDR(a, lit, field) header((a)->text, (a)->len, lit, sizeof(lit) - 1, (a)->field, sizeof((a)->field))

static void parse_article(struct article *a)
{
	if (!HDR(a, "Message-ID:", msgid) || strchr(a->msgid, '\t') || strchr(a->msgid, ' '))
		pl_die("article without a usable Message-ID");
	HDR(a, "Newsgroups:", groups);
	HDR(a, "Date:", date);
	HDR(a, "Expires:", expires);
	HDR(a, "Control:", control);
}

/* A Date header ("Mon, 13 Jan 1986 08:24:00 GMT") -> seconds; the getdate of news, by hand. */
static long parsedate(const char *s)
{
	static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	const char *comma = strchr(s, ',');
	if (comma)
		s = comma + 1;
	int day, year, hh, mm, ss;
	char mon[4];
	if (sscanf(s, " %d %3s %d %d:%d:%d", &day, mon, &year, &hh, &mm, &ss) != 6)
		return -1;
	const char *m = strstr(months, mon);
	if (!m || (m - months) % 3)
		return -1;
	struct tm tm = {0};
	tm.tm_mday = day;
	tm.tm_mon = (int)(m - months) / 3;
	tm.tm_year = year - 1900;
	tm.tm_hour = hh;
	tm.tm_min = mm;
	tm.tm_sec = ss;
	return (long)timegm(&tm);
}

/* Newsgroups: "a.b,c.d" -> list; only groups for which known(g) says yes. */
static int split_groups(char *list, char **out, int max)
{
	int n = 0;
	for (char *tok = strtok(list, ", "); tok && n < max; tok = strtok(NULL, ", "))
		out[n++] = tok;
	return n;
}

static void group_dir(const char *group, char *out, size_t outlen)
{
	snprintf(out, outlen, "%s", group);
	for (char *p = out; *p; p++)
		if (*p == '.')
			*p = '/';
}

/* ---------- sys file: which sites get which groups ---------- */

struct site {
	char name[64];
	char patterns[512];
	FILE *batch;       /* cnews: kept open */
};

static int parse_sys_line(char *line, struct site *s)
{
	char *colon = strchr(line, ':');
	if (!colon || line[0] == '#')
		return 0;
	*colon = '\0';
	snprintf(s->name, sizeof s->name, "%s", line);
	char *pat = colon + 1;
	char *end = strchr(pat, ':');
	if (end)
		*end = '\0';
	snprintf(s->patterns, sizeof s->patterns, "%s", pat);
	s->batch = NULL;
	return strcmp(s->name, "ME") != 0;
}

/* Does pattern (all, comp, comp.os.linux) match group? */
static int ngmatch1(const char *pat, size_t plen, const char *group)
{
	if (plen == 3 && memcmp(pat, "all", 3) == 0)
		return 1;
	return strncmp(pat, group, plen) == 0 && (group[plen] == '\0' || group[plen] == '.');
}

/* The last pattern of the comma list that matches decides. */
static int ngmatch(const char *patterns, const char *group)
{
	int result = 0;
	const char *p = patterns;
	while (*p) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		int neg = *p == '!';
		if (ngmatch1(p + neg, len - (size_t)neg, group))
			result = !neg;
		p += len + (comma ? 1 : 0);
	}
	return result;
}

/* ---------- reset ---------- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	if (remove(path) < 0 && errno != ENOENT)
		pl_die("remove %s: %s", path, strerror(errno));
	return 0;
}

static void copy_file(const char *from, const char *to)
{
	size_t len;
	char *buf = slurp(from, &len);
	int fd = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		pl_die("%s: %s", to, strerror(errno));
	writeall(fd, buf, len, to);
	close(fd);
	free(buf);
}

static int do_reset(const char *init)
{
	char path[PATH_MAX], from[PATH_MAX];
	struct stat st;
	if (stat(spool, &st) == 0 && nftw(spool, rm_entry, 32, FTW_DEPTH | FTW_PHYS) < 0)
		pl_die("cannot remove %s: %s", spool, strerror(errno));
	if (mkdir(spool, 0755) < 0)
		pl_die("mkdir %s: %s", spool, strerror(errno));
	/* active: every group, high 0, low 1; fixed-width numbers so it can be updated in place */
	snprintf(from, sizeof from, "%s/groups", init);
	size_t len;
	char *groups = slurp(from, &len);
	snprintf(path, sizeof path, "%s/active", spool);
	FILE *f = fopen(path, "w");
	if (!f)
		pl_die("%s: %s", path, strerror(errno));
	for (char *g = strtok(groups, "\n"); g; g = strtok(NULL, "\n"))
		fprintf(f, "%s %010ld %010ld y\n", g, 0L, 1L);
	if (fclose(f) != 0)
		pl_die("write %s: %s", path, strerror(errno));
	free(groups);
	snprintf(from, sizeof from, "%s/sys", init);
	snprintf(path, sizeof path, "%s/sys", spool);
	copy_file(from, path);
	snprintf(path, sizeof path, "%s/history", spool);
	close(open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644));
	snprintf(path, sizeof path, "%s/out.going", spool);
	mkdir(path, 0755);
	/* the batch directories of the sites in sys */
	snprintf(from, sizeof from, "%s/sys", init);
	char *sys = slurp(from, &len);
	for (char *line = strtok(sys, "\n"); line; line = strtok(NULL, "\n")) {
		struct site s;
		char copy[1024];
		snprintf(copy, sizeof copy, "%s", line);
		if (parse_sys_line(copy, &s)) {
			snprintf(path, sizeof path, "%s/out.going/%s", spool, s.name);
			mkdir(path, 0755);
		}
	}
	free(sys);
	return 0;
}

/* ---------- the index of history (cnews): message-id hash -> offset of the line ---------- */

struct hindex {
	uint32_t cap;        /* a power of two */
	uint32_t count;
	uint64_t *slot;      /* offset + 1, 0 = empty */
	uint32_t *hash;
};

static uint32_t fnv(const char *s, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	return h ? h : 1;
}

static void hx_init(struct hindex *x, uint32_t cap)
{
	x->cap = cap;
	x->count = 0;
	x->slot = calloc(cap, sizeof *x->slot);
	x->hash = calloc(cap, sizeof *x->hash);
	if (!x->slot || !x->hash)
		pl_die("out of memory (history index)");
}

static void hx_put(struct hindex *x, uint32_t h, uint64_t off);

static void hx_grow(struct hindex *x)
{
	struct hindex bigger;
	hx_init(&bigger, x->cap * 2);
	for (uint32_t i = 0; i < x->cap; i++)
		if (x->slot[i])
			hx_put(&bigger, x->hash[i], x->slot[i] - 1);
	free(x->slot);
	free(x->hash);
	*x = bigger;
}

static void hx_put(struct hindex *x, uint32_t h, uint64_t off)
{
	if ((x->count + 1) * 2 > x->cap)
		hx_grow(x);
	uint32_t i = h & (x->cap - 1);
	while (x->slot[i])
		i = (i + 1) & (x->cap - 1);
	x->slot[i] = off + 1;
	x->hash[i] = h;
	x->count++;
}

/* History lines this process appended sit in a stdio buffer until flushed: flush only when a
 * lookup needs to read one (rare: a duplicate or a cancel), not for every article. */
static FILE *hx_pending;
static long hx_flushed = -1;   /* history is on disk below this offset (-1: all of it) */

/* Offset of the history line of msgid, or -1; lines are checked through pread of fd. */
static long hx_get(struct hindex *x, int fd, const char *msgid)
{
	size_t n = strlen(msgid);
	uint32_t h = fnv(msgid, n);
	char buf[300];
	for (uint32_t i = h & (x->cap - 1); x->slot[i]; i = (i + 1) & (x->cap - 1)) {
		if (x->hash[i] != h)
			continue;
		off_t off = (off_t)(x->slot[i] - 1);
		if (hx_pending && hx_flushed >= 0 && off >= hx_flushed) {
			fflush(hx_pending);
			hx_flushed = lseek(fd, 0, SEEK_END);
		}
		ssize_t got = pread(fd, buf, n + 1, off);
		if (got == (ssize_t)(n + 1) && memcmp(buf, msgid, n) == 0 && buf[n] == '\t')
			return (long)off;
	}
	return -1;
}

/* history.idx: "NIDX" cap count, then cap x (offset+1 u64, hash u32). */
static void hx_load(struct hindex *x, const char *name)
{
	int fd = open(name, O_RDONLY);
	uint32_t head[3];
	if (fd < 0 || read(fd, head, sizeof head) != (ssize_t)sizeof head || head[0] != 0x5844494e) {
		if (fd >= 0)
			close(fd);
		hx_init(x, 1024);
		return;
	}
	x->cap = head[1];
	x->count = head[2];
	x->slot = xmalloc(sizeof *x->slot * x->cap);
	x->hash = xmalloc(sizeof *x->hash * x->cap);
	if (read(fd, x->slot, sizeof *x->slot * x->cap) != (ssize_t)(sizeof *x->slot * x->cap) ||
	    read(fd, x->hash, sizeof *x->hash * x->cap) != (ssize_t)(sizeof *x->hash * x->cap))
		pl_die("%s: truncated", name);
	close(fd);
}

static void hx_save(struct hindex *x, const char *name)
{
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof tmp, "%s.new", name);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		pl_die("%s: %s", tmp, strerror(errno));
	uint32_t head[3] = {0x5844494e, x->cap, x->count};
	writeall(fd, (char *)head, sizeof head, tmp);
	writeall(fd, (char *)x->slot, sizeof *x->slot * x->cap, tmp);
	writeall(fd, (char *)x->hash, sizeof *x->hash * x->cap, tmp);
	close(fd);
	if (rename(tmp, name) < 0)
		pl_die("rename %s: %s", tmp, strerror(errno));
}

/* ---------- the in-core active file (cnews) ---------- */

struct group {
	char *name;
	long high, low;
	uint32_t hash;
};

struct active {
	struct group *g;
	int n;
	int *table;      /* hash -> index + 1 */
	uint32_t cap;
};

static void active_load(struct active *a, const char *name)
{
	size_t len;
	char *buf = slurp(name, &len);
	int lines = 0;
	for (size_t i = 0; i < len; i++)
		lines += buf[i] == '\n';
	a->g = xmalloc(sizeof *a->g * (size_t)(lines + 1));
	a->n = 0;
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		char *sp = strchr(line, ' ');
		if (!sp)
			continue;
		*sp = '\0';
		struct group *g = &a->g[a->n++];
		g->name = line;
		g->high = strtol(sp + 1, &sp, 10);
		g->low = strtol(sp, NULL, 10);
		g->hash = fnv(line, strlen(line));
	}
	for (a->cap = 64; a->cap < (uint32_t)a->n * 2; a->cap *= 2)
		;
	a->table = calloc(a->cap, sizeof *a->table);
	for (int i = 0; i < a->n; i++) {
		uint32_t j = a->g[i].hash & (a->cap - 1);
		while (a->table[j])
			j = (j + 1) & (a->cap - 1);
		a->table[j] = i + 1;
	}
}

static struct group *active_find(struct active *a, const char *name)
{
	uint32_t h = fnv(name, strlen(name));
	for (uint32_t j = h & (a->cap - 1); a->table[j]; j = (j + 1) & (a->cap - 1)) {
		struct group *g = &a->g[a->table[j] - 1];
		if (g->hash == h && g->name[0] == name[0] && strcmp(g->name, name) == 0)
			return g;
	}
	return NULL;
}

static void active_save(struct active *a, const char *name)
{
	size_t cap = 64;
	for (int i = 0; i < a->n; i++)
		cap += strlen(a->g[i].name) + 32;
	char *buf = xmalloc(cap);
	size_t len = 0;
	for (int i = 0; i < a->n; i++)
		len += (size_t)sprintf(buf + len, "%s %010ld %010ld y\n", a->g[i].name, a->g[i].high, a->g[i].low);
	spurt(name, buf, len);
	free(buf);
}

/* ---------- cnews filing ---------- */

static int mkdirs(char *path)   /* make the directories of a relative path, as mkdir -p of its dirname */
{
	for (char *p = strchr(path, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		int r = mkdir(path, 0755);
		*p = '/';
		if (r < 0 && errno != EEXIST)
			return -1;
	}
	return 0;
}

/* Create rel exclusively (making its directories only when that fails); the fd. */
static int create_article(char *rel)
{
	int fd = open(rel, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0 && errno == ENOENT && mkdirs(rel) == 0)
		fd = open(rel, O_WRONLY | O_CREAT | O_EXCL, 0644);
	return fd;
}

static int link_article(const char *from, char *rel)
{
	int r = link(from, rel);
	if (r < 0 && errno == ENOENT && mkdirs(rel) == 0)
		r = link(from, rel);
	return r;
}

static void cancel_files(const char *groups_field)
{
	/* "comp.os.linux/12 sci.physics/3" -> unlink comp/os/linux/12 ... */
	char copy[1024], rel[PATH_MAX];
	snprintf(copy, sizeof copy, "%s", groups_field);
	char *save;
	for (char *e = strtok_r(copy, " \n", &save); e; e = strtok_r(NULL, " \n", &save)) {
		group_dir(e, rel, sizeof rel);
		unlink(rel);
	}
}

static long counts[6];
enum { ACCEPTED, DUPLICATES, CANCELS, LINKS, EXPIRED, KEPT };

static void print_counts(const char *phase, long articles)
{
	static const char *const names[] = { "accepted", "duplicates", "cancels", "links", "expired", "kept" };
	char metric[64];
	snprintf(metric, sizeof metric, "news.%s.articles", phase);
	pl_metric(metric, (double)articles, "articles");
	for (int i = 0; i < 6; i++) {
		snprintf(metric, sizeof metric, "news.%s.%s", phase, names[i]);
		pl_metric(metric, (double)counts[i], i == LINKS ? "links" : "articles");
	}
}

static int cnews_file(const char *feedname)
{
	size_t feedlen;
	char *feed = slurp(feedname, &feedlen);
	if (chdir(spool) < 0)
		pl_die("chdir %s: %s", spool, strerror(errno));
	struct active act;
	active_load(&act, "active");
	size_t syslen;
	char *sysbuf = slurp("sys", &syslen);
	struct site sites[MAXSITES];
	int nsites = 0;
	for (char *line = strtok(sysbuf, "\n"); line && nsites < MAXSITES; line = strtok(NULL, "\n"))
		nsites += parse_sys_line(line, &sites[nsites]);
	for (int i = 0; i < nsites; i++) {
		char name[PATH_MAX];
		snprintf(name, sizeof name, "out.going/%s/togo", sites[i].name);
		if (!(sites[i].batch = fopen(name, "a")))
			pl_die("%s: %s", name, strerror(errno));
	}
	struct hindex idx;
	hx_load(&idx, "history.idx");
	int hfd = open("history", O_RDWR | O_APPEND);
	if (hfd < 0)
		pl_die("history: %s", strerror(errno));
	FILE *hist = fdopen(hfd, "a");
	static char histbuf[1 << 16];
	setvbuf(hist, histbuf, _IOFBF, sizeof histbuf);
	long hoff = lseek(hfd, 0, SEEK_END);
	long articles = 0;
	hx_pending = hist;
	hx_flushed = hoff;

	char *p = feed, *end = feed + feedlen;
	while (p < end) {
		if (strncmp(p, "#! rnews ", 9) != 0)
			pl_die("feed: expected '#! rnews N' at byte %ld", (long)(p - feed));
		char *nl;
		long n = strtol(p + 9, &nl, 10);
		if (*nl != '\n' || n < 0 || nl + 1 + n > end)
			pl_die("feed: bad batch header at byte %ld", (long)(p - feed));
		struct article a = {0};
		a.text = nl + 1;
		a.len = (size_t)n;
		p = nl + 1 + n;
		articles++;
		parse_article(&a);
		if (hx_get(&idx, hfd, a.msgid) >= 0) {
			counts[DUPLICATES]++;
			continue;
		}
		char *names[MAXGROUPS];
		struct group *gs[MAXGROUPS];
		int ng = 0;
		if (a.control[0]) {
			gs[ng++] = active_find(&act, "control");
		} else {
			int k = split_groups(a.groups, names, MAXGROUPS);
			for (int i = 0; i < k; i++) {
				struct group *g = active_find(&act, names[i]);
				int dup = 0;
				for (int j = 0; j < ng; j++)
					dup |= gs[j] == g;
				if (g && !dup)
					gs[ng++] = g;
			}
			if (ng == 0)
				gs[ng++] = active_find(&act, "junk");
		}
		if (!gs[0])
			pl_die("active has no control or junk group");
		char first[PATH_MAX], rel[PATH_MAX], entries[1024];
		size_t elen = 0;
		for (int i = 0; i < ng; i++) {
			struct group *g = gs[i];
			for (;;) {
				g->high++;
				group_dir(g->name, rel, sizeof rel);
				size_t l = strlen(rel);
				snprintf(rel + l, sizeof rel - l, "/%ld", g->high);
				if (i == 0) {
					int fd = create_article(rel);
					if (fd < 0 && errno == EEXIST)
						continue;
					if (fd < 0)
						pl_die("create %s: %s", rel, strerror(errno));
					writeall(fd, a.text, a.len, rel);
					close(fd);
					memcpy(first, rel, strlen(rel) + 1);
				} else {
					if (link_article(first, rel) < 0) {
						if (errno == EEXIST)
							continue;
						pl_die("link %s: %s", rel, strerror(errno));
					}
					counts[LINKS]++;
				}
				break;
			}
			elen += (size_t)snprintf(entries + elen, sizeof entries - elen, "%s%s/%ld", i ? " " : "",
						 g->name, g->high);
		}
		long arrival = parsedate(a.date);
		long expires = a.expires[0] ? parsedate(a.expires) : -1;
		uint32_t h = fnv(a.msgid, strlen(a.msgid));
		char line[1600];
		int ll = expires >= 0 ? snprintf(line, sizeof line, "%s\t%ld~%ld\t%s\n", a.msgid, arrival, expires, entries)
				      : snprintf(line, sizeof line, "%s\t%ld~-\t%s\n", a.msgid, arrival, entries);
		fputs(line, hist);
		hx_put(&idx, h, (uint64_t)hoff);
		hoff += ll;
		for (int s = 0; s < nsites; s++) {
			int want = 0;
			for (int i = 0; i < ng && !want; i++)
				want = ngmatch(sites[s].patterns, gs[i]->name);
			if (want)
				fprintf(sites[s].batch, "%s %zu\n", first, a.len);
		}
		counts[ACCEPTED]++;
		if (strncmp(a.control, "cancel ", 7) == 0) {
			counts[CANCELS]++;
			long off = hx_get(&idx, hfd, a.control + 7);
			if (off >= 0) {
				char buf[1600];
				ssize_t got = pread(hfd, buf, sizeof buf - 1, off);
				buf[got > 0 ? got : 0] = '\0';
				char *nl2 = strchr(buf, '\n');
				if (nl2)
					*nl2 = '\0';
				char *t1 = strchr(buf, '\t');
				char *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
				if (t2)
					cancel_files(t2 + 1);
			}
		}
	}
	if (fflush(hist) != 0)
		pl_die("write history: %s", strerror(errno));
	fclose(hist);
	hx_save(&idx, "history.idx");
	active_save(&act, "active");
	for (int i = 0; i < nsites; i++)
		if (fclose(sites[i].batch) != 0)
			pl_die("write batch for %s: %s", sites[i].name, strerror(errno));
	print_counts("file", articles);
	return 0;
}

/* ---------- bnews filing: the unbatcher forks and execs rnews1 per article ---------- */

static int bnews_file(const char *feedname)
{
	FILE *feed = fopen(feedname, "r");
	if (!feed)
		pl_die("%s: %s", feedname, strerror(errno));
	char tmp[PATH_MAX], line[256];
	snprintf(tmp, sizeof tmp, "%s/.rnews.%ld", spool, (long)getpid());
	long articles = 0;
	static char copybuf[BUFSIZ];
	while (fgets(line, sizeof line, feed)) {
		long n;
		if (sscanf(line, "#! rnews %ld", &n) != 1 || n < 0)
			pl_die("feed: expected '#! rnews N', got %.40s", line);
		FILE *t = fopen(tmp, "w");
		if (!t)
			pl_die("%s: %s", tmp, strerror(errno));
		while (n > 0) {
			size_t want = n < (long)sizeof copybuf ? (size_t)n : sizeof copybuf;
			size_t got = fread(copybuf, 1, want, feed);
			if (got == 0)
				pl_die("feed: truncated article");
			fwrite(copybuf, 1, got, t);
			n -= (long)got;
		}
		if (fclose(t) != 0)
			pl_die("write %s: %s", tmp, strerror(errno));
		articles++;
		pid_t pid = fork();
		if (pid < 0)
			pl_die("fork: %s", strerror(errno));
		if (pid == 0) {
			int fd = open(tmp, O_RDONLY);
			if (fd < 0 || dup2(fd, 0) < 0)
				_exit(127);
			close(fd);
			execl(self, "rnews", "rnews1", "-S", spool, (char *)NULL);
			_exit(127);
		}
		int status;
		if (waitpid(pid, &status, 0) < 0)
			pl_die("wait: %s", strerror(errno));
		if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 2 &&
					   WEXITSTATUS(status) != 3))
			pl_die("rnews exited with status %d on article %ld", WEXITSTATUS(status), articles);
		int code = WEXITSTATUS(status);
		if (code == 2)
			counts[DUPLICATES]++;
		else
			counts[ACCEPTED]++;
		if (code == 3)
			counts[CANCELS]++;
		unlink(tmp);
	}
	fclose(feed);
	/* rnews1 counts its links in a file: collect it (bnews did keep a log) */
	char logname[PATH_MAX];
	snprintf(logname, sizeof logname, "%s/log", spool);
	FILE *log = fopen(logname, "r");
	if (log) {
		while (fgets(line, sizeof line, log))
			counts[LINKS] += strtol(line, NULL, 10);
		fclose(log);
	}
	print_counts("file", articles);
	return 0;
}

/* Linear history search with full path names: the line's third field, or 0. */
static int history_lookup(const char *msgid, char *groups_out, size_t outlen)
{
	char path[PATH_MAX], line[2048];
	snprintf(path, sizeof path, "%s/history", spool);
	FILE *h = fopen(path, "r");
	if (!h)
		pl_die("%s: %s", path, strerror(errno));
	size_t n = strlen(msgid);
	int found = 0;
	while (fgets(line, sizeof line, h)) {
		if (strncmp(line, msgid, n) == 0 && line[n] == '\t') {
			char *t2 = strchr(line + n + 1, '\t');
			snprintf(groups_out, outlen, "%s", t2 ? t2 + 1 : "");
			found = 1;
			break;
		}
	}
	fclose(h);
	return found;
}

static void unlink_full(const char *entries)
{
	char copy[1024], rel[PATH_MAX], full[PATH_MAX];
	snprintf(copy, sizeof copy, "%s", entries);
	char *save;
	for (char *e = strtok_r(copy, " \n", &save); e; e = strtok_r(NULL, " \n", &save)) {
		struct stat st;
		group_dir(e, rel, sizeof rel);
		snprintf(full, sizeof full, "%s/%s", spool, rel);
		if (stat(full, &st) == 0)
			unlink(full);
	}
}

static int bnews_rnews1(void)
{
	char path[PATH_MAX], line[2048];
	/* the sys file, a line at a time, every article */
	struct site sites[MAXSITES];
	int nsites = 0;
	snprintf(path, sizeof path, "%s/sys", spool);
	FILE *f = fopen(path, "r");
	if (!f)
		pl_die("%s: %s", path, strerror(errno));
	while (fgets(line, sizeof line, f) && nsites < MAXSITES) {
		line[strcspn(line, "\n")] = '\0';
		nsites += parse_sys_line(line, &sites[nsites]);
	}
	fclose(f);
	/* the article, a character at a time */
	size_t cap = 8192, len = 0;
	char *text = xmalloc(cap);
	int c;
	while ((c = getchar()) != EOF) {
		if (len + 1 >= cap)
			text = realloc(text, cap *= 2);
		if (!text)
			pl_die("out of memory");
		text[len++] = (char)c;
	}
	struct article a = {0};
	a.text = text;
	a.len = len;
	parse_article(&a);
	char found[1024];
	if (history_lookup(a.msgid, found, sizeof found))
		return 2;
	/* the active file, a line at a time, every article: which groups exist */
	char *names[MAXGROUPS];
	char want[MAXGROUPS][256];
	int nw = 0;
	if (a.control[0]) {
		snprintf(want[nw++], 256, "control");
	} else {
		int k = split_groups(a.groups, names, MAXGROUPS);
		snprintf(path, sizeof path, "%s/active", spool);
		for (int i = 0; i < k; i++) {
			int dup = 0;
			for (int j = 0; j < nw; j++)
				dup |= strcmp(want[j], names[i]) == 0;
			if (dup)
				continue;
			f = fopen(path, "r");
			if (!f)
				pl_die("%s: %s", path, strerror(errno));
			size_t nl = strlen(names[i]);
			while (fgets(line, sizeof line, f))
				if (strncmp(line, names[i], nl) == 0 && line[nl] == ' ') {
					snprintf(want[nw++], 256, "%s", names[i]);
					break;
				}
			fclose(f);
		}
		if (nw == 0)
			snprintf(want[nw++], 256, "junk");
	}
	char first[PATH_MAX] = "", entries[1024] = "";
	size_t elen = 0;
	long links = 0;
	for (int i = 0; i < nw; i++) {
		/* next number: scan active, update the line in place */
		snprintf(path, sizeof path, "%s/active", spool);
		f = fopen(path, "r+");
		if (!f)
			pl_die("%s: %s", path, strerror(errno));
		size_t nl = strlen(want[i]);
		long high = -1;
		long at = 0;
		while (at = ftell(f), fgets(line, sizeof line, f))
			if (strncmp(line, want[i], nl) == 0 && line[nl] == ' ') {
				high = strtol(line + nl + 1, NULL, 10);
				break;
			}
		if (high < 0)
			pl_die("group %s vanished from active", want[i]);
		char dir[PATH_MAX], full[PATH_MAX];
		group_dir(want[i], dir, sizeof dir);
		/* make the directories, a stat for every component */
		char partial[PATH_MAX];
		snprintf(partial, sizeof partial, "%s/%s", spool, dir);
		for (char *s = partial + strlen(spool) + 1;; s++) {
			if (*s == '/' || *s == '\0') {
				char keep = *s;
				struct stat st;
				*s = '\0';
				if (stat(partial, &st) < 0 && mkdir(partial, 0755) < 0)
					pl_die("mkdir %s: %s", partial, strerror(errno));
				*s = keep;
				if (!keep)
					break;
			}
		}
		for (;;) {
			struct stat st;
			high++;
			snprintf(full, sizeof full, "%s/%s/%ld", spool, dir, high);
			if (stat(full, &st) == 0)   /* a stat before every create */
				continue;
			break;
		}
		if (i == 0) {
			int fd = creat(full, 0644);
			if (fd < 0)
				pl_die("creat %s: %s", full, strerror(errno));
			/* a line per write */
			const char *p = a.text, *end = a.text + a.len;
			while (p < end) {
				const char *eol = memchr(p, '\n', (size_t)(end - p));
				size_t n = eol ? (size_t)(eol - p + 1) : (size_t)(end - p);
				writeall(fd, p, n, full);
				p += n;
			}
			close(fd);
			snprintf(first, sizeof first, "%s", full);
		} else {
			if (link(first, full) < 0)
				pl_die("link %s: %s", full, strerror(errno));
			links++;
		}
		fseek(f, at + (long)nl + 1, SEEK_SET);
		fprintf(f, "%010ld", high);
		if (fclose(f) != 0)
			pl_die("write %s: %s", path, strerror(errno));
		elen += (size_t)snprintf(entries + elen, sizeof entries - elen, "%s%s/%ld", i ? " " : "", want[i], high);
	}
	/* history: human-readable date, reopened for every article */
	snprintf(path, sizeof path, "%s/history", spool);
	f = fopen(path, "a");
	if (!f)
		pl_die("%s: %s", path, strerror(errno));
	fprintf(f, "%s\t%s\t%s\n", a.msgid, a.date, entries);
	if (fclose(f) != 0)
		pl_die("write %s: %s", path, strerror(errno));
	/* batch files, reopened for every article */
	for (int s = 0; s < nsites; s++) {
		int w = 0;
		for (int i = 0; i < nw && !w; i++)
			w = ngmatch(sites[s].patterns, want[i]);
		if (!w)
			continue;
		snprintf(path, sizeof path, "%s/out.going/%s/togo", spool, sites[s].name);
		f = fopen(path, "a");
		if (!f)
			pl_die("%s: %s", path, strerror(errno));
		fprintf(f, "%s %zu\n", first + strlen(spool) + 1, a.len);
		fclose(f);
	}
	if (links) {
		snprintf(path, sizeof path, "%s/log", spool);
		f = fopen(path, "a");
		if (f) {
			fprintf(f, "%ld\n", links);
			fclose(f);
		}
	}
	if (strncmp(a.control, "cancel ", 7) == 0) {
		if (history_lookup(a.control + 7, found, sizeof found))
			unlink_full(found);
		return 3;
	}
	return 0;
}

/* ---------- expire ---------- */

/* An article kept: each group it is in ("group/number ...") keeps it above its low mark. */
static void lower_marks(struct active *act, char *entries)
{
	char *save;
	for (char *e = strtok_r(entries, " ", &save); e; e = strtok_r(NULL, " ", &save)) {
		char *slash = strrchr(e, '/');
		if (!slash)
			continue;
		*slash = '\0';
		struct group *g = active_find(act, e);
		long n = strtol(slash + 1, NULL, 10);
		if (g && n < g->low)
			g->low = n;
	}
}

static int cnews_expire(long now, long cutoff)
{
	if (chdir(spool) < 0)
		pl_die("chdir %s: %s", spool, strerror(errno));
	size_t len;
	char *hist = slurp("history", &len);
	struct active act;
	active_load(&act, "active");
	for (int i = 0; i < act.n; i++)
		act.g[i].low = act.g[i].high + 1;
	char *out = xmalloc(len + 1);
	size_t olen = 0;
	struct hindex idx;
	uint32_t cap = 1024;
	long lines = 0;
	for (size_t i = 0; i < len; i++)
		lines += hist[i] == '\n';
	while (cap < (uint64_t)lines * 4)
		cap *= 2;
	hx_init(&idx, cap);
	long entries = 0;
	char *p = hist, *end = hist + len;
	while (p < end) {
		char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			eol = end;
		char *t1 = memchr(p, '\t', (size_t)(eol - p));
		char *t2 = t1 ? memchr(t1 + 1, '\t', (size_t)(eol - t1 - 1)) : NULL;
		if (!t2)
			pl_die("history: malformed line at byte %ld", (long)(p - hist));
		entries++;
		char *tilde;
		long arrival = strtol(t1 + 1, &tilde, 10);
		long expires = (*tilde == '~' && tilde[1] != '-') ? strtol(tilde + 1, NULL, 10) : -1;
		int gone = expires >= 0 ? expires <= now : arrival <= cutoff;
		char field[1024];
		size_t flen = (size_t)(eol - t2 - 1);
		if (flen >= sizeof field)
			flen = sizeof field - 1;
		memcpy(field, t2 + 1, flen);
		field[flen] = '\0';
		if (gone) {
			counts[EXPIRED]++;
			cancel_files(field);   /* just charge ahead: a missing file was cancelled */
		} else {
			counts[KEPT]++;
			lower_marks(&act, field);
			hx_put(&idx, fnv(p, (size_t)(t1 - p)), olen);
			memcpy(out + olen, p, (size_t)(eol - p));
			olen += (size_t)(eol - p);
			out[olen++] = '\n';
		}
		p = eol + 1;
	}
	spurt("history", out, olen);
	hx_save(&idx, "history.idx");
	active_save(&act, "active");
	print_counts("expire", entries);
	return 0;
}

static int bnews_expire(long now, long cutoff)
{
	char path[PATH_MAX], newpath[PATH_MAX], line[2048];
	/* the active file's groups, for the low marks */
	snprintf(path, sizeof path, "%s/active", spool);
	struct active act;
	active_load(&act, path);
	for (int i = 0; i < act.n; i++)
		act.g[i].low = act.g[i].high + 1;
	snprintf(path, sizeof path, "%s/history", spool);
	snprintf(newpath, sizeof newpath, "%s/history.new", spool);
	FILE *h = fopen(path, "r");
	FILE *out = fopen(newpath, "w");
	if (!h || !out)
		pl_die("%s: %s", path, strerror(errno));
	long entries = 0;
	while (fgets(line, sizeof line, h)) {
		char *t1 = strchr(line, '\t');
		char *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
		if (!t2)
			pl_die("history: malformed line %ld", entries + 1);
		entries++;
		char date[128];
		snprintf(date, sizeof date, "%.*s", (int)(t2 - t1 - 1), t1 + 1);
		long arrival = parsedate(date);   /* the date conversion, every line, every run */
		char field[1024];
		snprintf(field, sizeof field, "%s", t2 + 1);
		field[strcspn(field, "\n")] = '\0';
		/* open the article and read its headers for Expires: (B expire's disaster) */
		long expires = -1;
		char first[PATH_MAX], rel[PATH_MAX], hdr[HDRMAX];
		char copy[1024];
		snprintf(copy, sizeof copy, "%s", field);
		char *sp = strchr(copy, ' ');
		if (sp)
			*sp = '\0';
		group_dir(copy, rel, sizeof rel);
		snprintf(first, sizeof first, "%s/%s", spool, rel);
		FILE *art = fopen(first, "r");
		if (art) {
			while (fgets(hdr, sizeof hdr, art) && hdr[0] != '\n')
				if (strncasecmp(hdr, "Expires:", strlen("Expires:")) == 0)
					expires = parsedate(hdr + strlen("Expires:"));
			fclose(art);
		}
		int gone = expires >= 0 ? expires <= now : arrival <= cutoff;
		if (gone) {
			counts[EXPIRED]++;
			unlink_full(field);
		} else {
			counts[KEPT]++;
			fputs(line, out);
			lower_marks(&act, field);
		}
	}
	fclose(h);
	if (fclose(out) != 0)
		pl_die("write %s: %s", newpath, strerror(errno));
	if (rename(newpath, path) < 0)
		pl_die("rename %s: %s", newpath, strerror(errno));
	snprintf(path, sizeof path, "%s/active", spool);
	active_save(&act, path);
	print_counts("expire", entries);
	return 0;
}

int main(int argc, char **argv)
{
	pl_progname = "news";
	if (argc < 2)
		pl_die("usage: news reset|file|expire|rnews1 [options]");
	const char *cmd = argv[1];
	const char *feed = NULL, *init = NULL;
	long now = -1, cutoff = -1;
	int opt;
	optind = 2;
	while ((opt = getopt(argc, argv, "s:S:f:I:n:c:")) != -1) {
		switch (opt) {
		case 's': style = optarg; break;
		case 'S': spool = optarg; break;
		case 'f': feed = optarg; break;
		case 'I': init = optarg; break;
		case 'n': now = (long)pl_parse_uint('n', optarg, 0, LONG_MAX); break;
		case 'c': cutoff = (long)pl_parse_uint('c', optarg, 0, LONG_MAX); break;
		default: pl_usage_error("bad option");
		}
	}
	if (!spool || spool[0] != '/')
		pl_die("-S SPOOL (an absolute path) is required");
	int bnews = strcmp(style, "bnews") == 0;
	if (!bnews && strcmp(style, "cnews") != 0)
		pl_die("-s %s: style is bnews or cnews", style);
	if (strcmp(cmd, "rnews1") == 0)
		return bnews_rnews1();
	if (strcmp(cmd, "reset") == 0) {
		if (!init)
			pl_die("reset needs -I INITDIR");
		return do_reset(init);
	}
	if (strcmp(cmd, "file") == 0) {
		if (!feed)
			pl_die("file needs -f FEED");
		static char me[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", me, sizeof me - 1);
		if (n <= 0)
			pl_die("cannot find my own program (/proc/self/exe)");
		me[n] = '\0';
		self = me;
		return bnews ? bnews_file(feed) : cnews_file(feed);
	}
	if (strcmp(cmd, "expire") == 0) {
		if (now < 0 || cutoff < 0)
			pl_die("expire needs -n NOW -c CUTOFF");
		return bnews ? bnews_expire(now, cutoff) : cnews_expire(now, cutoff);
	}
	pl_die("unknown command %s", cmd);
	return 1;
}
