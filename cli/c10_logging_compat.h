// cli/c10_logging_compat.h — quiets LibTorch's own log lines (c10d's TCPStore and Gloo log
// connection failures at ERROR before throwing), so that export-cli's errors stay one line on
// stderr: the exception pt2rt rethrows carries the same text.
//
// LibTorch 1.13 (Debian) logs through glog (C10_USE_GLOG): glog's FLAGS_minloglevel; LibTorch
// 2.x without glog: c10's FLAGS_caffe2_log_level. 3 = FATAL only.
#pragma once

#include <c10/util/Logging.h>

namespace pt2rt::cli {

inline void quiet_c10_logging() {
#ifdef C10_USE_GLOG
  FLAGS_minloglevel = 3;
#else
  FLAGS_caffe2_log_level = 3;
#endif
}

}  // namespace pt2rt::cli
