// Shared by the letterbox kernel and the object crop kernel (read before either).

// BT.601 limited range, with OpenCV's integer arithmetic (COLOR_YUV2BGR_I420, 20-bit fixed
// point, each 2x2 block sharing one chroma sample): an I420 frame gives the tensor that
// cv2.cvtColor to BGR followed by the BGR path gives, bit for bit.
inline int3 i420_bgr(__global const uchar *frame, const int w, const int h, const int x,
                     const int y)
{
    const int luma = max(0, (int)frame[(size_t)y * w + x] - 16) * 1220542 + (1 << 19);
    const size_t plane = (size_t)w * h;
    const size_t chroma = (size_t)(y >> 1) * (w >> 1) + (x >> 1);
    const int u = (int)frame[plane + chroma] - 128;
    const int v = (int)frame[plane + plane / 4 + chroma] - 128;
    return clamp((int3)(luma + 2116026 * u, luma - 852492 * v - 409993 * u, luma + 1673527 * v) >> 20,
                 0, 255);
}
