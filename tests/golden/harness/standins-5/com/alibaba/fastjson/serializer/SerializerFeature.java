// Stand-in (ours): names of fastjson features that RocketMQ's code passes along.
package com.alibaba.fastjson.serializer;

public enum SerializerFeature {
    BrowserCompatible
}
