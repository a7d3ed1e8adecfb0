#include "ddp/distributed/bucket_plan.h"

#include <stdexcept>

namespace loom::ddp {

std::vector<BucketRange> planBuckets(const ParameterStore& store, size_t firstBucketCapBytes,
                                     size_t bucketCapBytes) {
  if (firstBucketCapBytes == 0) throw std::invalid_argument("planBuckets: firstBucketCapBytes is 0");
  if (bucketCapBytes == 0) throw std::invalid_argument("planBuckets: bucketCapBytes is 0");
  std::vector<BucketRange> buckets;
  if (store.count() == 0) return buckets;

  BucketRange current;
  bool open = false;
  for (size_t i = store.count(); i-- > 0;) {
    const ParamInfo& p = store.info(i);
    const size_t capElements = (buckets.empty() ? firstBucketCapBytes : bucketCapBytes) / sizeof(float);
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
  }
  buckets.push_back(current);
  return buckets;
}

}  // namespace loom::ddp
