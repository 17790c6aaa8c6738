// Letterbox + colour order + scale/mean/std + HWC->CHW, in one pass, for a batch of frames.
//
// The resize reproduces OpenCV's INTER_LINEAR for 8-bit images bit for bit: 11-bit fixed-point
// weights from host-computed tables (xofs/alpha per output column, yofs/beta per output row),
// a horizontal pass in int, and the vertical pass as OpenCV's SIMD code does it
// ((x >> 4) * beta >> 16, summed, then (+2) >> 2). The numpy backend (cv2.resize) and this
// kernel therefore give the same tensor.
//
// One work-item per output pixel (x, y) of frame z; it writes all three channel planes.
// OUT_T is float or half; half is written with vstore_half, which needs no extension.

#pragma OPENCL FP_CONTRACT OFF

#ifndef OUT_HALF
#define STORE(value, index, out) ((out)[(index)] = (value))
#else
#define STORE(value, index, out) vstore_half((value), (index), (out))
#endif

__kernel void letterbox(
    __global const uchar *src,      // frames, HWC BGR or I420, src_frame_bytes apart
    const ulong src_offset,         // byte offset of frame 0 in src
    const int src_stride,           // bytes per row
    const int src_frame_bytes,
    const int src_w,
    const int src_h,
    __global const int *xofs,       // per resized column: left source column
    __global const short *alpha,    // per resized column: two weights
    __global const int *yofs,       // per resized row: top source row
    __global const short *beta,     // per resized row: two weights
    const int resized_w,
    const int resized_h,
    const int pad_x,
    const int pad_y,
    const int out_w,
    const int out_h,
    const int out_frame_offset,     // element index of frame 0 in out (slot in a batch)
    __global OUT_T *out,            // CHW planes, 3 * out_h * out_w elements per frame
    const int swap_rb,              // 1: RGB tensor from BGR frame
    const float scale,
    const float mean0, const float mean1, const float mean2,
    const float std0, const float std1, const float std2,
    const int pad_value,
    const int src_i420)              // 1: I420 planes (Y, then U and V at half size)
{
    const int x = get_global_id(0);
    const int y = get_global_id(1);
    const int z = get_global_id(2);
    if (x >= out_w || y >= out_h) {
        return;
    }
    const int rx = x - pad_x;
    const int ry = y - pad_y;
    int bgr[3] = {pad_value, pad_value, pad_value};
    if (rx >= 0 && rx < resized_w && ry >= 0 && ry < resized_h) {
        const int sx0 = xofs[rx];
        const int sx1 = min(sx0 + 1, src_w - 1);
        const int a0 = alpha[2 * rx];
        const int a1 = alpha[2 * rx + 1];
        const int sy0 = clamp(yofs[ry], 0, src_h - 1);
        const int sy1 = clamp(yofs[ry] + 1, 0, src_h - 1);
        const int b0 = beta[2 * ry];
        const int b1 = beta[2 * ry + 1];
        __global const uchar *frame = src + src_offset + (size_t)z * src_frame_bytes;
        __global const uchar *row0 = frame + (size_t)sy0 * src_stride;
        __global const uchar *row1 = frame + (size_t)sy1 * src_stride;
        // Each tap converted once (all three channels), not once per channel.
        int3 p00, p01, p10, p11;
        if (src_i420) {
            p00 = i420_bgr(frame, src_w, src_h, sx0, sy0);
            p01 = i420_bgr(frame, src_w, src_h, sx1, sy0);
            p10 = i420_bgr(frame, src_w, src_h, sx0, sy1);
            p11 = i420_bgr(frame, src_w, src_h, sx1, sy1);
        }
        for (int c = 0; c < 3; ++c) {
            int t00, t01, t10, t11;
            if (src_i420) {
                t00 = c == 0 ? p00.x : c == 1 ? p00.y : p00.z;
                t01 = c == 0 ? p01.x : c == 1 ? p01.y : p01.z;
                t10 = c == 0 ? p10.x : c == 1 ? p10.y : p10.z;
                t11 = c == 0 ? p11.x : c == 1 ? p11.y : p11.z;
            } else {
                t00 = row0[sx0 * 3 + c];
                t01 = row0[sx1 * 3 + c];
                t10 = row1[sx0 * 3 + c];
                t11 = row1[sx1 * 3 + c];
            }
            const int h0 = t00 * a0 + t01 * a1;
            const int h1 = t10 * a0 + t11 * a1;
            const int v = (((h0 >> 4) * b0) >> 16) + (((h1 >> 4) * b1) >> 16);
            bgr[c] = clamp((v + 2) >> 2, 0, 255);
        }
    }
    const int plane = out_h * out_w;
    const size_t base = (size_t)out_frame_offset + (size_t)z * 3 * plane + (size_t)y * out_w + x;
    const float means[3] = {mean0, mean1, mean2};
    const float stds[3] = {std0, std1, std2};
    for (int c = 0; c < 3; ++c) {
        const int source_channel = swap_rb ? 2 - c : c;
        // Same order of operations as the numpy path: scale, minus mean, divided by std.
        const float value = ((float)bgr[source_channel] * scale - means[c]) / stds[c];
        STORE(value, base + (size_t)c * plane, out);
    }
}
