// Object crops: for each crop, an affine warp of its frame (crop and resize at once), the
// grey outside the frame and outside the crop's window, colour order, scale/mean/std and the
// model's layout, in one pass, for every crop of a batch of frames.
//
// The warp is OpenCV's warpAffine (INTER_LINEAR, BORDER_CONSTANT) as OpenCV 5 computes it for
// 8-bit images: the source point of each output pixel in float from the inverse matrix, four
// taps weighted in float, rounded to the nearest level. The numpy path (cv2.warpAffine) and
// this kernel agree within one level, as the letterbox kernel's tolerance allows.
//
// One work-item per output pixel (x, y) of crop z; it writes all three channels.

#pragma OPENCL FP_CONTRACT OFF

inline float3 tap(__global const uchar *frame, const int w, const int h, const int i420,
                  const int x, const int y, const float pad)
{
    if (x < 0 || y < 0 || x >= w || y >= h) {
        return (float3)(pad, pad, pad);
    }
    if (i420) {
        return convert_float3(i420_bgr(frame, w, h, x, y));
    }
    __global const uchar *p = frame + ((size_t)y * w + x) * 3;
    return (float3)((float)p[0], (float)p[1], (float)p[2]);
}

__kernel void crops(
    __global const uchar *src,      // the batch's frames, packed: BGR or I420 planes
    __global const ulong *offsets,  // per crop: byte offset of its frame in src
    __global const int *frames,     // per crop: frame width, height, 1 if I420
    __global const float *inverse,  // per crop: 2 x 3, output pixel -> frame pixel
    __global const int *windows,    // per crop: x1, y1, x2, y2 of the output it fills
    const int out_w,
    const int out_h,
    __global float *out,            // N x 3 x H x W, or N x H x W x 3 with channels_last
    const int channels_last,
    const int swap_rb,              // 1: RGB tensor from BGR pixels
    const float scale,
    const float mean0, const float mean1, const float mean2,
    const float std0, const float std1, const float std2,
    const int pad_value)
{
    const int x = get_global_id(0);
    const int y = get_global_id(1);
    const int z = get_global_id(2);
    if (x >= out_w || y >= out_h) {
        return;
    }
    const float pad = (float)pad_value;
    float3 bgr = (float3)(pad, pad, pad);
    __global const int *window = windows + 4 * z;
    if (x >= window[0] && y >= window[1] && x < window[2] && y < window[3]) {
        __global const float *m = inverse + 6 * z;
        const float sx = m[0] * (float)x + m[1] * (float)y + m[2];
        const float sy = m[3] * (float)x + m[4] * (float)y + m[5];
        const float fx0 = floor(sx);
        const float fy0 = floor(sy);
        const float ax = sx - fx0;
        const float ay = sy - fy0;
        const int x0 = (int)fx0;
        const int y0 = (int)fy0;
        const int w = frames[3 * z];
        const int h = frames[3 * z + 1];
        const int i420 = frames[3 * z + 2];
        __global const uchar *frame = src + offsets[z];
        const float3 t00 = tap(frame, w, h, i420, x0, y0, pad);
        const float3 t01 = tap(frame, w, h, i420, x0 + 1, y0, pad);
        const float3 t10 = tap(frame, w, h, i420, x0, y0 + 1, pad);
        const float3 t11 = tap(frame, w, h, i420, x0 + 1, y0 + 1, pad);
        const float3 top = t00 * (1.0f - ax) + t01 * ax;
        const float3 bottom = t10 * (1.0f - ax) + t11 * ax;
        bgr = clamp(rint(top * (1.0f - ay) + bottom * ay), 0.0f, 255.0f);
    }
    const float b = swap_rb ? bgr.z : bgr.x;
    const float r = swap_rb ? bgr.x : bgr.z;
    // Same order of operations as the numpy path: scale, minus mean, divided by std.
    const float c0 = (b * scale - mean0) / std0;
    const float c1 = (bgr.y * scale - mean1) / std1;
    const float c2 = (r * scale - mean2) / std2;
    if (channels_last) {
        const size_t at = (((size_t)z * out_h + y) * out_w + x) * 3;
        out[at] = c0;
        out[at + 1] = c1;
        out[at + 2] = c2;
    } else {
        const size_t plane = (size_t)out_h * out_w;
        const size_t at = (size_t)z * 3 * plane + (size_t)y * out_w + x;
        out[at] = c0;
        out[at + plane] = c1;
        out[at + 2 * plane] = c2;
    }
}
