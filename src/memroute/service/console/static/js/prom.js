// Reading the Prometheus text exposition format (version 0.0.4) that /metrics answers, and the
// histogram arithmetic the metrics page needs.

const SAMPLE = /^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+(\S+)/;
const LABEL = /([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

function unescape(value) {
  return value.replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
}

/** {families: Map name → {type, help, samples: [{name, labels, value}]}} from the text format. */
export function parse(text) {
  const families = new Map();
  const family = (name) => {
    if (!families.has(name)) families.set(name, { type: "untyped", help: "", samples: [] });
    return families.get(name);
  };
  const types = new Map();
  for (const line of text.split("\n")) {
    if (line.startsWith("# TYPE ")) {
      const [name, type] = line.slice(7).split(" ");
      types.set(name, type);
      family(name).type = type;
    } else if (line.startsWith("# HELP ")) {
      const rest = line.slice(7);
      const cut = rest.indexOf(" ");
      family(rest.slice(0, cut)).help = unescape(rest.slice(cut + 1));
    } else if (line && !line.startsWith("#")) {
      const m = SAMPLE.exec(line);
      if (!m) continue;
      const labels = {};
      for (const [, key, value] of (m[3] || "").matchAll(LABEL)) labels[key] = unescape(value);
      // A histogram's _bucket/_count/_sum samples belong to the family without the suffix.
      let base = m[1];
      for (const suffix of ["_bucket", "_count", "_sum", "_total", "_created"]) {
        const stem = m[1].slice(0, -suffix.length);
        if (m[1].endsWith(suffix) && types.has(stem)) {
          base = stem;
          break;
        }
      }
      family(base).samples.push({ name: m[1], labels, value: Number(m[4]) });
    }
  }
  return families;
}

const key = (labels) => JSON.stringify(Object.entries(labels).filter(([k]) => k !== "le").sort());

/** A histogram family's series: [{labels, buckets: [{le, count (not cumulative)}], count, sum}]. */
export function histograms(fam) {
  const series = new Map();
  const get = (labels) => {
    const k = key(labels);
    if (!series.has(k)) {
      const own = { ...labels };
      delete own.le;
      series.set(k, { labels: own, cumulative: [], count: 0, sum: 0 });
    }
    return series.get(k);
  };
  for (const sample of fam?.samples || []) {
    if (sample.name.endsWith("_bucket")) get(sample.labels).cumulative.push({ le: sample.labels.le, value: sample.value });
    else if (sample.name.endsWith("_count")) get(sample.labels).count = sample.value;
    else if (sample.name.endsWith("_sum")) get(sample.labels).sum = sample.value;
  }
  return [...series.values()].map((x) => {
    const sorted = x.cumulative.sort((a, b) => bound(a.le) - bound(b.le));
    const buckets = sorted.map((b, i) => ({ le: b.le, count: b.value - (i ? sorted[i - 1].value : 0) }));
    return { labels: x.labels, buckets, cumulative: sorted, count: x.count, sum: x.sum };
  });
}

function bound(le) {
  return le === "+Inf" ? Infinity : Number(le);
}

/** The q-quantile estimated from cumulative buckets, interpolating inside the bucket (as Prometheus'
 * histogram_quantile does); null without observations. */
export function quantile(q, cumulative) {
  const total = cumulative.length ? cumulative[cumulative.length - 1].value : 0;
  if (!total) return null;
  const rank = q * total;
  let prevBound = 0;
  let prevCount = 0;
  for (const b of cumulative) {
    const upper = bound(b.le);
    if (b.value >= rank) {
      if (upper === Infinity) return prevBound;  // above the largest finite bound: that bound is all we know
      const inBucket = b.value - prevCount;
      return inBucket ? prevBound + ((upper - prevBound) * (rank - prevCount)) / inBucket : upper;
    }
    prevBound = upper;
    prevCount = b.value;
  }
  return prevBound;
}

/** A counter family's samples as [{labels, value}] (the _created samples left out). */
export function counters(fam) {
  return (fam?.samples || []).filter((x) => !x.name.endsWith("_created")).map((x) => ({ labels: x.labels, value: x.value }));
}
