#include "ddp/distributed/bucket_plan.h"

#include <stdexcept>

namespace loom::ddp {
namespace {

// Parameters [begin, end) in reverse order, filled greedily: the first
// bucket capped at firstCap elements, the others at cap; a parameter of at
// least closeAfter elements (0: none) closes its bucket.
void planRange(const ParameterStore& store, size_t begin, size_t end, size_t firstCap, size_t cap,
               size_t closeAfter, std::vector<BucketRange>& buckets) {
  const size_t before = buckets.size();
  BucketRange current;
  bool open = false;
  for (size_t i = end; i-- > begin;) {
    const ParamInfo& p = store.info(i);
    const size_t capElements = buckets.size() == before ? firstCap : cap;
    if (open && current.size + p.size > capElements) {
      buckets.push_back(current);
      open = false;
    }
    if (!open) {
      current = BucketRange{i, i, p.offset, 0};
      open = true;
    }
    // Walking backwards, each parameter sits just before the bucket's range.
    current.firstParam = i;
    current.offset = p.offset;
    current.size += p.size;
    if (closeAfter > 0 && p.size >= closeAfter) {
      buckets.push_back(current);
      open = false;
    }
  }
  if (open) buckets.push_back(current);
}

}  // namespace

std::vector<BucketRange> planBuckets(const ParameterStore& store, size_t firstBucketCapBytes,
                                     size_t bucketCapBytes, size_t lastBucketCapBytes, size_t closeAfterBytes) {
  if (firstBucketCapBytes == 0) throw std::invalid_argument("planBuckets: firstBucketCapBytes is 0");
  if (bucketCapBytes == 0) throw std::invalid_argument("planBuckets: bucketCapBytes is 0");
  std::vector<BucketRange> buckets;
  const size_t count = store.count();
  if (count == 0) return buckets;
  const size_t firstCap = firstBucketCapBytes / sizeof(float), cap = bucketCapBytes / sizeof(float);
  // Rounded up: a parameter of closeAfterBytes closes its bucket, whatever the remainder.
  const size_t closeAfter = (closeAfterBytes + sizeof(float) - 1) / sizeof(float);

  // The tail: parameters [0, tailEnd), as many as fit the last cap (at least one).
  size_t tailEnd = count;
  if (lastBucketCapBytes > 0) {
    const size_t lastCap = lastBucketCapBytes / sizeof(float);
    size_t size = store.info(0).size;
    tailEnd = 1;
    while (tailEnd < count && size + store.info(tailEnd).size <= lastCap) size += store.info(tailEnd++).size;
  }
  if (tailEnd == count) {  // no last cap, or every parameter fits it
    planRange(store, 0, count, firstCap, cap, closeAfter, buckets);
    return buckets;
  }
  planRange(store, tailEnd, count, firstCap, cap, closeAfter, buckets);
  // One bucket: it all fits, and it is the last, so nothing waits behind it.
  planRange(store, 0, tailEnd, lastBucketCapBytes / sizeof(float), cap, 0, buckets);
  return buckets;
}

}  // namespace loom::ddp
